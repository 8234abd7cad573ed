// KeyRecords: the records that recreate one key of any type — an SSM session, a V-store
// session, a KV.PREFIX registration, a string, a prefix-index namespace — as a snapshot writes
// them for a whole database and DUMP / MIGRATE serialise them for one key. The records hold
// handles to the stored values (no byte is copied). Pure functions over the stores; any thread.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "persist/mutation.h"
#include "store/keyspace.h"
#include "store/prefix_index.h"
#include "store/state_store.h"
#include "store/vector_store.h"

namespace prefixd::persist {

using RecordSink = std::function<void(const Mutation&)>;

// A V-store session: its creation (with its index), then each layer's stored runs, one record
// per run, so a sparse layer writes what it stores, not zeros from row 0.
void WriteVectorSession(const std::string& sid, const store::VectorSessionInfo& info,
                        const std::vector<store::LayerRead>& layers, const RecordSink& write);
// A KV.PREFIX registration alone (its `_pk` / `_pv` sessions are records of their own).
KvPrefix KvPrefixRecord(const std::string& ns, const store::PrefixSpec& spec);
// A prefix-index namespace: its shape, its blocks parents first, then its checkpoints.
void WritePrefixNamespace(const std::string& ns, const store::PrefixIndex& index,
                          const RecordSink& write);
// A string key with its value, encoding and expiry; a cold value is read from disk (a failed
// read throws std::runtime_error).
StringSet StringRecord(const std::string& key, const store::KeyInfo& info);
// The record that recreates a set, list, hash, sorted-set or stream key (SetValue, ListValue,
// HashValue, ZsetValue, StreamValue), expiry aside.
Mutation MembersRecord(const std::string& key, const store::KeyInfo& info);

// The stores of one database, read-only.
struct KeyStores {
  const store::StateStore& state;
  const store::VectorStore& vectors;
  const store::PrefixStore& prefixes;
};

// Every record that recreates `key` (whose keyspace entry is `info`), expiry excluded (a string
// is written without one): the value as DEL would remove it. A KV.PREFIX registration comes with
// the SSM state stored under its name and its `_pk` / `_pv` sessions. Cold SSM layers are read
// from disk (a failed read throws std::runtime_error). False when the key vanished meanwhile.
bool KeyRecords(const KeyStores& stores, const std::string& key, const store::KeyInfo& info,
                std::vector<Mutation>& out);

}  // namespace prefixd::persist
