// HashOrderedMap: a chained hash table from (hash, key) to a value, whose walk order is the
// order of (hash, key): a bucket is the hash's top bits and every chain is kept sorted, so a hash
// is a cursor that stays valid across inserts, erases and resizes (SCAN), while a lookup costs
// one bucket's chain instead of a tree's descent. Nodes never move: a pointer to a node or its key
// stays valid until that node is erased. Not thread-safe; its owner's lock guards it.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace prefixd::store {

template <class Value>
class HashOrderedMap {
 public:
  // Hashes are positions below 2^kHashBits; callers mask theirs.
  static constexpr int kHashBits = 58;

  struct Node {
    Node* next = nullptr;  // the next node of the same bucket, in order
    uint64_t hash = 0;
    std::string key;
    Value value;
  };
  // What one node costs beyond its key's own allocation (a key over std::string's inline
  // buffer): the node with allocator overhead, plus its share of the bucket array.
  static constexpr size_t kBytesPerNode = ((sizeof(Node) + 8 + 15) / 16) * 16 + sizeof(Node*);

  HashOrderedMap() = default;
  HashOrderedMap(const HashOrderedMap&) = delete;
  HashOrderedMap& operator=(const HashOrderedMap&) = delete;
  ~HashOrderedMap() { Clear(); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  Node* Find(uint64_t hash, std::string_view key) const {
    if (buckets_.empty()) return nullptr;
    for (Node* n = buckets_[BucketOf(hash)]; n != nullptr && n->hash <= hash; n = n->next) {
      if (n->hash == hash && n->key == key) return n;
    }
    return nullptr;
  }

  // The node of (hash, key), made with `value` when there was none; true when it was made.
  std::pair<Node*, bool> Emplace(uint64_t hash, std::string_view key, Value value) {
    assert(hash >> kHashBits == 0);
    if (buckets_.empty()) Rehash(kMinBits);
    Node** link = &buckets_[BucketOf(hash)];
    while (*link != nullptr && Before(**link, hash, key)) link = &(*link)->next;
    if (*link != nullptr && (*link)->hash == hash && (*link)->key == key) return {*link, false};
    Node* node = new Node{*link, hash, std::string(key), std::move(value)};
    *link = node;
    ++size_;
    if (size_ > buckets_.size()) Rehash(bits_ + 1);
    return {node, true};
  }

  void Erase(Node* node) {
    Node** link = &buckets_[BucketOf(node->hash)];
    while (*link != node) link = &(*link)->next;
    *link = node->next;
    delete node;
    --size_;
    if (bits_ > kMinBits && size_ * 4 < buckets_.size()) Rehash(bits_ - 1);
  }

  // The first node at or after position `hash` in walk order, or nullptr.
  Node* LowerBound(uint64_t hash) const {
    if (buckets_.empty()) return nullptr;
    const size_t bucket = BucketOf(hash);
    for (Node* n = buckets_[bucket]; n != nullptr; n = n->next) {
      if (n->hash >= hash) return n;
    }
    return FirstFrom(bucket + 1);
  }
  Node* First() const { return FirstFrom(0); }
  Node* Next(const Node* node) const {
    return node->next != nullptr ? node->next : FirstFrom(BucketOf(node->hash) + 1);
  }

  void Clear() {
    for (Node*& head : buckets_) {
      while (head != nullptr) delete std::exchange(head, head->next);
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
    return n.hash != hash ? n.hash < hash : std::string_view(n.key) < key;
  }
  size_t BucketOf(uint64_t hash) const { return static_cast<size_t>(hash >> (kHashBits - bits_)); }
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
        Node**& tail = tails[BucketOf(node->hash)];
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
