// HashOrderedMap: an intrusive chained hash table of nodes keyed by (hash, key), whose walk order
// is the order of (hash, key): a bucket is the hash's top bits and every chain is kept sorted, so
// a hash is a cursor that stays valid across inserts, erases and resizes (SCAN), while a lookup
// costs one bucket's chain instead of a tree's descent. The caller allocates its nodes (any
// layout: the keyspace packs key and value into one chunk); the map links them and frees them
// through Node::Destroy. A linked node never moves unless its owner Replaces it. Not
// thread-safe; its owner's lock guards it.
//
// A Node provides: `Node* next` (the map's link), `uint64_t Hash() const` (below 2^kHashBits),
// `std::string_view Key() const` and `static void Destroy(Node*)`.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace prefixd::store {

template <class Node>
class HashOrderedMap {
 public:
  // Hashes are positions below 2^kHashBits; callers mask theirs.
  static constexpr int kHashBits = 57;
  // The bucket array's share of a node: one pointer per bucket, at most one bucket per node.
  static constexpr size_t kBucketBytesPerNode = sizeof(Node*);

  HashOrderedMap() = default;
  HashOrderedMap(const HashOrderedMap&) = delete;
  HashOrderedMap& operator=(const HashOrderedMap&) = delete;
  ~HashOrderedMap() { Clear(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  Node* Find(uint64_t hash, std::string_view key) const {
    if (buckets_.empty()) return nullptr;
    for (Node* n = buckets_[BucketOf(hash)]; n != nullptr && n->Hash() <= hash; n = n->next) {
      if (n->Hash() == hash && n->Key() == key) return n;
    }
    return nullptr;
  }

  // Links `node` at its position and returns it; when a node of the same (hash, key) is already
  // there, returns that one instead and leaves `node` to the caller.
  Node* Insert(Node* node) {
    const uint64_t hash = node->Hash();
    const std::string_view key = node->Key();
    assert(hash >> kHashBits == 0);
    if (buckets_.empty()) Rehash(kMinBits);
    Node** link = &buckets_[BucketOf(hash)];
    while (*link != nullptr && Before(**link, hash, key)) link = &(*link)->next;
    if (*link != nullptr && (*link)->Hash() == hash && (*link)->Key() == key) return *link;
    node->next = *link;
    *link = node;
    ++size_;
    if (size_ > buckets_.size()) Rehash(bits_ + 1);
    return node;
  }

  // Puts `fresh` (same hash and key) where `old` is linked; `old` is unlinked, not freed.
  void Replace(Node* old, Node* fresh) {
    assert(old->Hash() == fresh->Hash() && old->Key() == fresh->Key());
    *LinkTo(old) = fresh;
    fresh->next = old->next;
  }

  // Unlinks and frees `node`.
  void Erase(Node* node) {
    *LinkTo(node) = node->next;
    Node::Destroy(node);
    --size_;
    if (bits_ > kMinBits && size_ * 4 < buckets_.size()) Rehash(bits_ - 1);
  }

  // The first node at or after position `hash` in walk order, or nullptr.
  Node* LowerBound(uint64_t hash) const {
    if (buckets_.empty()) return nullptr;
    const size_t bucket = BucketOf(hash);
    for (Node* n = buckets_[bucket]; n != nullptr; n = n->next) {
      if (n->Hash() >= hash) return n;
    }
    return FirstFrom(bucket + 1);
  }
  Node* First() const { return FirstFrom(0); }
  Node* Next(const Node* node) const {
    return node->next != nullptr ? node->next : FirstFrom(BucketOf(node->Hash()) + 1);
  }

  // Frees every node.
  void Clear() {
    for (Node*& head : buckets_) {
      while (head != nullptr) Node::Destroy(std::exchange(head, head->next));
    }
    buckets_.clear();
    buckets_.shrink_to_fit();
    bits_ = 0;
    size_ = 0;
  }
  void swap(HashOrderedMap& other) noexcept {
    buckets_.swap(other.buckets_);
    std::swap(bits_, other.bits_);
    std::swap(size_, other.size_);
  }

 private:
  static constexpr int kMinBits = 3;

  static bool Before(const Node& n, uint64_t hash, std::string_view key) {
    return n.Hash() != hash ? n.Hash() < hash : n.Key() < key;
  }
  size_t BucketOf(uint64_t hash) const { return static_cast<size_t>(hash >> (kHashBits - bits_)); }
  Node** LinkTo(const Node* node) {
    Node** link = &buckets_[BucketOf(node->Hash())];
    while (*link != node) link = &(*link)->next;
    return link;
  }
  Node* FirstFrom(size_t bucket) const {
    for (; bucket < buckets_.size(); ++bucket) {
      if (buckets_[bucket] != nullptr) return buckets_[bucket];
    }
    return nullptr;
  }
  // Old buckets are walked in order and nodes appended at the new chains' tails, so every new
  // chain is still sorted: growing splits a chain in two, shrinking joins two neighbours.
  void Rehash(int bits) {
    std::vector<Node*> fresh(size_t{1} << bits, nullptr);
    std::vector<Node**> tails(fresh.size());
    for (size_t i = 0; i < fresh.size(); ++i) tails[i] = &fresh[i];
    bits_ = bits;
    for (Node* head : buckets_) {
      while (head != nullptr) {
        Node* node = std::exchange(head, head->next);
        node->next = nullptr;
        Node**& tail = tails[BucketOf(node->Hash())];
        *tail = node;
        tail = &node->next;
      }
    }
    buckets_.swap(fresh);
  }

  std::vector<Node*> buckets_;
  int bits_ = 0;
  size_t size_ = 0;
};

}  // namespace prefixd::store
