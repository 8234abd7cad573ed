#include "commands/families.h"

namespace prefixd::commands {

void AddCommands(Registry& registry) {
  RegisterConnectionCommands(registry);
  RegisterServerCommands(registry);
  RegisterSsmCommands(registry);
  RegisterPersistenceCommands(registry);
  RegisterVstoreCommands(registry);
  RegisterKvPrefixCommands(registry);
  RegisterPrefixIndexCommands(registry);
  RegisterKeyCommands(registry);
  RegisterStringCommands(registry);
  RegisterCollectionCommands(registry);
  RegisterHashCommands(registry);
  RegisterZsetCommands(registry);
  RegisterStreamCommands(registry);
  RegisterStreamGroupCommands(registry);
  RegisterClusterCommands(registry);
  RegisterMigrateCommands(registry);
  RegisterTransactionCommands(registry);
  RegisterReplicationCommands(registry);
  RegisterShmCommands(registry);
}

}  // namespace prefixd::commands
