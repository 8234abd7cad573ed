// The command families: the one function that adds them all to a Registry, each family's own, the
// helper the one-key families share and what one family lends others. Registration runs once at
// start-up, before the registry serves; handlers on the io thread of the calling connection.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/command.h"
#include "engine/engine.h"
#include "engine/registry.h"

namespace prefixd::commands {

// Every family's commands, in the order they are added.
void AddCommands(Registry& registry);

// Adds Redis commands of one key at argument 1 to `registry` under one group and ACL category
// (the set, list, hash and sorted-set families): MakeSpec, then what Redis 7.0.15's COMMAND
// reports.
class OneKeyFamily {
 public:
  OneKeyFamily(Registry& registry, std::string group, uint32_t acl)
      : registry_(registry), group_(std::move(group)), acl_(acl) {}
  void operator()(std::string name, int arity, uint32_t flags, std::string syntax,
                  std::string summary, Handler h, std::string complexity, std::string since,
                  uint32_t key_flags, std::vector<Arg> args,
                  std::vector<std::string> tips = {}) const {
    registry_.Add(
        AsRedisOneKey(MakeSpec(group_, 1, std::move(name), arity, flags, std::move(syntax),
                               std::move(summary), h, std::move(complexity)),
                      std::move(since), acl_, key_flags, std::move(args), std::move(tips)));
  }

 private:
  Registry& registry_;
  std::string group_;
  uint32_t acl_;
};

// What one family lends others: the HELP reply of a container command (server_commands.cc), the
// INFO command (info.cc, registered with the server commands) and the INFO sections other
// families own: # Replication (replication_commands.cc), # Pion and # Vstore
// (kvprefix_commands.cc).
void HelpReply(Context& ctx, const CommandSpec& container);
void InfoCommand(Context& ctx);
void ReplicationInfo(Engine& engine, std::string& out);
void PionInfoSection(Engine& e, std::string& out);
void VstoreInfoSection(Engine& e, std::string& out);
// A snapshot now, on the calling thread, with the log or without it (persistence_commands.cc):
// SAVE's, and SHUTDOWN SAVE's (server_commands.cc).
Status SaveNow(Engine& engine);

// Each command family adds its commands to the table.
void RegisterConnectionCommands(Registry& registry);
void RegisterServerCommands(Registry& registry);
void RegisterSsmCommands(Registry& registry);
void RegisterPersistenceCommands(Registry& registry);
void RegisterVstoreCommands(Registry& registry);
void RegisterKvPrefixCommands(Registry& registry);
void RegisterPrefixIndexCommands(Registry& registry);
void RegisterKeyCommands(Registry& registry);
void RegisterStringCommands(Registry& registry);
void RegisterCollectionCommands(Registry& registry);
void RegisterHashCommands(Registry& registry);
void RegisterZsetCommands(Registry& registry);
void RegisterStreamCommands(Registry& registry);
void RegisterStreamGroupCommands(Registry& registry);
void RegisterClusterCommands(Registry& registry);
void RegisterMigrateCommands(Registry& registry);
void RegisterTransactionCommands(Registry& registry);
void RegisterReplicationCommands(Registry& registry);
void RegisterShmCommands(Registry& registry);

}  // namespace prefixd::commands
