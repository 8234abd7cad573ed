// SET's write of a string value, shared by SET and GETSET and by SHM.SET (whose value comes from
// a client's file, not an argument): the NX/XX conditions, the expiry or KEEPTTL, and the
// replacing of a key of another type. On the io thread that runs the command.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/bytes.h"
#include "common/expiry_args.h"
#include "engine/command.h"
#include "store/keyspace.h"

namespace prefixd::commands {

enum class StringSetOutcome : uint8_t {
  kStored,
  kSkipped,  // NX or XX decided against it; nothing queued
  kRefused,  // an error is queued (a bad expiry, WRONGTYPE with GET, a refused write)
};

// Stores `value` as `key`'s string under SET's `options` (parsed by expiry::ParseStringOptions),
// holding the key's lock stripe. `at_ms` gets the absolute expiry written (0: none, or KEEPTTL),
// which replicas are sent; `old`, when given and the old value was looked at (GET, NX, XX, or a
// key that could not be overwritten in one step), gets it.
StringSetOutcome SetStringValue(Context& ctx, std::string_view key, Bytes value,
                                store::StringEncoding encoding,
                                const expiry::StringOptions& options, int64_t& at_ms,
                                std::optional<store::KeyInfo>* old = nullptr);

}  // namespace prefixd::commands
