// Registry (the command table and Dispatcher) driven directly, without a server: lookup in any
// case, Redis's texts for unknown commands, wrong arity, NOAUTH and OOM, and the one mutation
// path refusing a change before it touches the store (the V.STOREBATCH of issue 8, finding 2),
// and the keyspace's type check (-WRONGTYPE) before a typed command's handler.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "commands/families.h"
#include "common/settings.h"
#include "engine/engine.h"
#include "engine/registry.h"
#include "engine/session.h"
#include "protocol/reply_writer.h"
#include "protocol/request.h"
#include "server_api/client_state.h"

namespace prefixd::commands {
namespace {

class RegistryTest : public ::testing::Test {
 protected:
  RegistryTest() : engine_(settings_), registry_(engine_, AddCommands) {
    client_->authenticated = true;
  }

  // Runs one request as `client` and returns the RESP bytes of its reply.
  std::string Call(const std::vector<std::string>& args, server::ClientState* client = nullptr) {
    protocol::Request request;
    for (const std::string& arg : args) request.AddSmall(arg);
    protocol::ReplyWriter reply;
    registry_.Dispatch(client != nullptr ? *client : *client_, request, reply);
    std::string out;
    for (auto piece : reply.Buffers())
      out.append(reinterpret_cast<const char*>(piece.data()), piece.size());
    return out;
  }

  Settings settings_;
  Engine engine_;
  Registry registry_;
  std::shared_ptr<server::ClientState> client_ = std::make_shared<server::ClientState>();
};

TEST_F(RegistryTest, FindsCommandsInAnyCaseAndListsThemSorted) {
  ASSERT_NE(registry_.Find("ssm.prefix.store"), nullptr);
  EXPECT_EQ(registry_.Find("SSM.Prefix.STORE"), registry_.Find("ssm.prefix.store"));
  EXPECT_EQ(registry_.Find("ssm.prefix.stor"), nullptr);
  const auto all = registry_.All();
  ASSERT_GT(all.size(), 20u);
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1]->name, all[i]->name);
  EXPECT_EQ(Call({"Ssm.Prefix.Store", "s", "0", "abc"}), "+OK\r\n");
  EXPECT_EQ(Call({"ssm.prefix.fetch", "s", "0"}), "$3\r\nabc\r\n");
}

// Find remembers the last name it found on each thread: a name one byte away, a name at the
// remembered length's limit and past it, and a prefix of the remembered name must each be looked
// up afresh.
TEST_F(RegistryTest, TheLastNameFoundIsNeverMistakenForAnother) {
  const CommandSpec* get = registry_.Find("get");
  ASSERT_NE(get, nullptr);
  EXPECT_EQ(registry_.Find("get"), get);
  EXPECT_EQ(registry_.Find("GET"), get);
  EXPECT_EQ(registry_.Find("gex"), nullptr);
  EXPECT_EQ(registry_.Find("ge"), nullptr);
  EXPECT_EQ(registry_.Find("getex"), registry_.Find("GETEX"));
  EXPECT_NE(registry_.Find("getex"), get);
  const std::string longest = "ssm.prefix.mfetch";  // names up to 23 bytes are remembered
  ASSERT_NE(registry_.Find(longest), nullptr);
  EXPECT_EQ(registry_.Find(longest + "x"), nullptr);
  EXPECT_EQ(registry_.Find(std::string(23, 'g')), nullptr);
  EXPECT_EQ(registry_.Find(std::string(24, 'g')), nullptr);
  EXPECT_EQ(registry_.Find("get"), get);
}

// A registry built where another one lived (same address, same thread) finds its own entries,
// not the ones the thread remembered from the first.
TEST_F(RegistryTest, ARegistryInTheStorageOfAnEarlierOneFindsItsOwnEntries) {
  alignas(Registry) unsigned char storage[sizeof(Registry)];
  auto* first = new (storage) Registry(engine_, AddCommands);
  const CommandSpec* old = first->Find("get");
  ASSERT_NE(old, nullptr);
  first->~Registry();
  auto* second = new (storage) Registry(engine_, AddCommands);
  const CommandSpec* fresh = second->Find("get");
  const auto entries = second->All();
  EXPECT_NE(std::find(entries.begin(), entries.end(), fresh), entries.end());
  EXPECT_EQ(second->Find("GET"), fresh);
  second->~Registry();
}

TEST_F(RegistryTest, UnknownCommandAndWrongArityUseRedisTexts) {
  EXPECT_EQ(Call({"nope", "a", "b"}),
            "-ERR unknown command 'nope', with args beginning with: 'a' 'b' \r\n");
  EXPECT_EQ(Call({"ssm.prefix.store", "s", "0"}),
            "-ERR wrong number of arguments for 'ssm.prefix.store' command\r\n");
}

TEST_F(RegistryTest, AuthenticationIsRequiredWhenAPasswordIsSet) {
  ASSERT_EQ(settings_.Set("requirepass", "secret", true), "");
  server::ClientState stranger;
  EXPECT_EQ(Call({"ssm.prefix.fetch", "s", "0"}, &stranger),
            "-NOAUTH Authentication required.\r\n");
  EXPECT_EQ(Call({"auth", "secret"}, &stranger), "+OK\r\n");
  EXPECT_EQ(Call({"ssm.prefix.fetch", "s", "0"}, &stranger), "$-1\r\n");
}

TEST_F(RegistryTest, MaxmemoryRefusesWritesButServesReads) {
  EXPECT_EQ(Call({"ssm.prefix.store", "s", "0", std::string(4096, 'x')}), "+OK\r\n");
  ASSERT_EQ(settings_.Set("maxmemory", "1", true), "");
  EXPECT_EQ(Call({"ssm.prefix.store", "s", "1", "y"}),
            "-OOM command not allowed when used memory > 'maxmemory'.\r\n");
  EXPECT_EQ(Call({"ssm.prefix.fetch", "s", "0"}).substr(0, 7), "$4096\r\n");
  EXPECT_EQ(Call({"ssm.prefix.drop", "s"}), "+OK\r\n") << "a drop frees memory: it must pass";
}

// vstore-max-tokens at its largest (2^28; 2^40 once, in the build of issue 8's finding 2): a
// write past it is refused before it touches the store, and the last row below it is accepted
// and costs one chunk, not a table up to it.
TEST_F(RegistryTest, AWriteIsCheckedBeforeItIsAppliedAndAHighStartCostsItsChunk) {
  ASSERT_NE(settings_.Set("vstore-max-tokens", "268435457", false), "");
  ASSERT_EQ(settings_.Set("vstore-max-tokens", "268435456", false), "");
  EXPECT_EQ(Call({"v.create", "t", "65536", "VQUANT", "fp32"}), ":0\r\n");
  const std::string row(65536 * 4, '\x01');
  const std::string reply = Call({"v.storebatch", "t", "0", "268435456", "1", row});
  EXPECT_EQ(reply.substr(0, 5), "-ERR ") << reply;
  EXPECT_EQ(engine_.database(0).vectors.Stats().tokens, 0u);
  EXPECT_EQ(Call({"v.storebatch", "t", "0", "268435455", "1", row}), "+OK\r\n");
  EXPECT_EQ(engine_.database(0).vectors.Stats().tokens, uint64_t{1} << 28);
  EXPECT_LE(engine_.database(0).vectors.Stats().allocated_bytes, uint64_t{512} << 10);
}

TEST_F(RegistryTest, TheKeyspaceTypeCheckRunsBeforeTheHandler) {
  EXPECT_EQ(Call({"v.create", "t", "8", "VQUANT", "fp32"}), ":0\r\n");
  EXPECT_EQ(Call({"type", "t"}), "+vstore\r\n");
  EXPECT_EQ(Call({"ssm.prefix.store", "t", "0", "x"}),
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
  EXPECT_EQ(Call({"ssm.prefix.fetch", "t", "0"}),
            "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
  EXPECT_EQ(engine_.database(0).state.Stats().sessions, 0u)
      << "the refused store reached the store";
  EXPECT_EQ(Call({"del", "t"}), ":1\r\n");
  EXPECT_EQ(Call({"ssm.prefix.store", "t", "0", "x"}), "+OK\r\n");
  EXPECT_EQ(Call({"type", "t"}), "+ssm-prefix\r\n");
}

// A connection's MULTI queue and CLIENT REPLY switches are its Session's, made when first needed;
// CLIENT LIST's count of queued commands stays in ClientState for other threads.
TEST_F(RegistryTest, ATransactionAndTheReplySwitchesLiveInTheConnectionsSession) {
  server::ClientState client;
  client.authenticated = true;
  EXPECT_EQ(client.session, nullptr);
  EXPECT_FALSE(SessionOf(std::as_const(client)).in_multi);
  EXPECT_EQ(Call({"MULTI"}, &client), "+OK\r\n");
  ASSERT_NE(client.session, nullptr);
  const Session& session = SessionOf(std::as_const(client));
  EXPECT_EQ(Call({"SET", "k", "v"}, &client), "+QUEUED\r\n");
  EXPECT_TRUE(session.in_multi);
  EXPECT_EQ(session.multi_queue.size(), 1u);
  EXPECT_EQ(client.multi_count.load(), 1);
  EXPECT_EQ(Call({"EXEC"}, &client), "*1\r\n+OK\r\n");
  EXPECT_FALSE(session.in_multi);
  EXPECT_TRUE(session.multi_queue.empty());
  EXPECT_EQ(client.multi_count.load(), -1);

  EXPECT_EQ(Call({"CLIENT", "REPLY", "OFF"}, &client), "");
  EXPECT_TRUE(session.reply_off);
  EXPECT_EQ(Call({"PING"}, &client), "");
  EXPECT_EQ(Call({"CLIENT", "REPLY", "ON"}, &client), "+OK\r\n");
  EXPECT_FALSE(session.reply_off);
  // Another connection's session is its own.
  EXPECT_EQ(Call({"PING"}), "+PONG\r\n");
}

}  // namespace
}  // namespace prefixd::commands
