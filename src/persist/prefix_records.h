// The prefix index's records (PrefixNamespace, PrefixBlocks, PrefixCheckpoints, PrefixDrop,
// PrefixNamespaceDrop) checked against the namespace's shape and applied to the PrefixStore,
// for persist::Apply (the live path and replay alike). Pure functions; any thread.
#pragma once

#include <functional>
#include <string>

#include "persist/mutation.h"
#include "prefixd/status.h"
#include "store/prefix_index.h"

namespace prefixd::persist {

// The record as a store batch; an InvalidArgument saying why when it does not fit `shape`.
Status ToBatch(const store::PrefixShape& shape, const PrefixBlocks& r, store::BlockBatch* out);
Status ToBatch(const store::PrefixShape& shape, const PrefixCheckpoints& r,
               store::CheckpointBatch* out);
store::PrefixShape ShapeOf(const PrefixNamespace& r);

// `why` receives the reason a change did not happen (no namespace, another shape, a missing
// parent or anchor); `hook` runs under the namespace's lock only when it happens.
Outcome ApplyPrefix(const PrefixNamespace& r, store::PrefixStore& s,
                    const std::function<void()>& hook);
Outcome ApplyPrefix(const PrefixBlocks& r, store::PrefixStore& s,
                    const std::function<void()>& hook);
Outcome ApplyPrefix(const PrefixCheckpoints& r, store::PrefixStore& s,
                    const std::function<void()>& hook);
Outcome ApplyPrefix(const PrefixDrop& r, store::PrefixStore& s, const std::function<void()>& hook);
Outcome ApplyPrefix(const PrefixNamespaceDrop& r, store::PrefixStore& s,
                    const std::function<void()>& hook);

// Stateless checks for Check(): sizes of hashes, layer ids, ranges; an InvalidArgument says what
// is wrong.
Status CheckPrefixRecord(const PrefixNamespace& r);
Status CheckPrefixRecord(const PrefixBlocks& r);
Status CheckPrefixRecord(const PrefixCheckpoints& r);
Status CheckPrefixRecord(const PrefixDrop& r);

}  // namespace prefixd::persist
