// ArgReader: keywords in any case, integers at and past their limits, and the error it queues.
#include "commands/arg_reader.h"

#include <gtest/gtest.h>

#include "engine/engine.h"

namespace prefixd::commands {
namespace {

struct Fixture {
  explicit Fixture(std::initializer_list<std::string_view> argv) {
    for (auto a : argv) request.AddSmall(a);
  }
  std::string Replies() const {
    std::string out;
    for (auto b : reply.Buffers()) out.append(reinterpret_cast<const char*>(b.data()), b.size());
    return out;
  }
  Settings settings;
  Engine engine{settings};
  server::ClientState client;
  protocol::Request request;
  protocol::ReplyWriter reply;
  CommandSpec spec;
  Context ctx{client, request, reply, engine, spec};
};

TEST(ArgReader, KeywordsAndOneOfMatchInAnyCase) {
  Fixture f({"cmd", "nx", "Sync", "rest"});
  ArgReader r(f.ctx, 1);
  EXPECT_FALSE(r.Keyword("XX"));
  EXPECT_TRUE(r.Keyword("NX"));
  EXPECT_EQ(r.OneOf({"ASYNC", "SYNC"}), 1u);
  EXPECT_EQ(r.OneOf({"ASYNC", "SYNC"}), std::nullopt);  // not consumed
  EXPECT_EQ(r.remaining(), 1u);
  EXPECT_EQ(r.Next(), "rest");
  EXPECT_FALSE(r.more());
  EXPECT_FALSE(r.Keyword("rest"));
  EXPECT_EQ(r.OneOf({"rest"}), std::nullopt);
  EXPECT_EQ(f.Replies(), "");
}

// An option's name matches only when its values follow (Redis's moreargs): otherwise it stays
// unread, for whatever the caller makes of it next (an id, a syntax error).
TEST(ArgReader, AnOptionMatchesOnlyWithItsValues) {
  Fixture f({"cmd", "LIMIT", "5", "group", "g"});
  ArgReader r(f.ctx, 1);
  EXPECT_EQ(r.position(), 1u);
  EXPECT_FALSE(r.Keyword("LIMIT", 5));
  EXPECT_TRUE(r.Keyword("limit", 1));
  EXPECT_EQ(r.Integer(), 5);
  EXPECT_EQ(r.position(), 3u);
  EXPECT_FALSE(r.Keyword("GROUP", 2));  // only one value follows
  EXPECT_TRUE(r.Keyword("GROUP", 1));
  EXPECT_EQ(r.Next(), "g");
  EXPECT_EQ(r.position(), 5u);
  Fixture last({"cmd", "maxlen"});
  ArgReader l(last.ctx, 1);
  EXPECT_EQ(l.OneOf({"MINID", "MAXLEN"}, 1), std::nullopt);  // no value after it
  EXPECT_EQ(l.OneOf({"MINID", "MAXLEN"}), 1u);
  EXPECT_FALSE(l.more());
  EXPECT_EQ(f.Replies(), "");
}

TEST(ArgReader, IntegersAtAndPastTheirLimits) {
  Fixture f({"cmd", "0", "10", "11", "-1", "9223372036854775807", "9223372036854775808", "1x"});
  ArgReader r(f.ctx, 1);
  EXPECT_EQ(r.Integer(0, 10), 0);
  EXPECT_EQ(r.Integer(0, 10), 10);
  EXPECT_EQ(r.Integer(0, 10, "ERR eleven"), std::nullopt);
  EXPECT_EQ(r.Integer(0, 10), std::nullopt);
  EXPECT_EQ(r.Integer(), INT64_MAX);
  EXPECT_EQ(r.Integer(), std::nullopt);
  EXPECT_EQ(r.Integer(), std::nullopt);
  EXPECT_EQ(r.Integer(), std::nullopt);  // none left: an error, not a crash
  EXPECT_EQ(f.Replies(),
            "-ERR eleven\r\n"
            "-ERR value is not an integer or out of range\r\n"
            "-ERR value is not an integer or out of range\r\n"
            "-ERR value is not an integer or out of range\r\n"
            "-ERR value is not an integer or out of range\r\n");
  EXPECT_EQ(f.reply.error_count(), 5u);
  EXPECT_EQ(f.reply.last_error_code(), "ERR");
}

}  // namespace
}  // namespace prefixd::commands
