// What makes two llama.cpp contexts' states interchangeable (include/prefixd/llama.h,
// ModelIdentity), and the check that the library loaded at run time is the one built against.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "ggml.h"
#include "prefixd/llama.h"

namespace prefixd::llama {
namespace {

std::string Hex128(XXH128_hash_t h) {
  char text[33];
  std::snprintf(text, sizeof(text), "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return text;
}

}  // namespace

std::string ModelIdentity::Namespace(std::string_view prefix, uint32_t block_size,
                                     std::string_view vquant) const {
  std::string ns = "{" + std::string(prefix) + ":" + digest + ":" + std::to_string(block_size);
  if (!vquant.empty()) ns += ":" + std::string(vquant);
  return ns + "}";
}

Result<std::string> HashModelFile(const std::string& gguf_path) {
  const int fd = ::open(gguf_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::IoError(gguf_path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::IoError(gguf_path + ": " + std::strerror(err));
  }
  const auto size = static_cast<size_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    return Status::InvalidArgument(gguf_path + " is empty");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return Status::IoError(gguf_path + ": mmap: " + std::strerror(errno));
  ::madvise(map, size, MADV_SEQUENTIAL);
  const XXH128_hash_t h = XXH3_128bits(map, size);
  ::munmap(map, size);
  return Hex128(h);
}

ModelIdentity IdentityFor(std::string_view model_hash, const llama_context_params& params) {
  ModelIdentity id;
  id.model = std::string(model_hash);
  id.build = std::string("ggml ") + ggml_version() + " " + ggml_commit();
  // What changes the bytes of the state: the cache's element types and, through flash attention,
  // whether V is stored transposed. (Batch sizes and threads change rounding, not meaning: a
  // state from either is a state of the same prompt.)
  id.cache_types = std::string("type_k ") + ggml_type_name(params.type_k) + " type_v " +
                   ggml_type_name(params.type_v) + " flash_attn " +
                   llama_flash_attn_type_name(params.flash_attn_type);
  const std::string all = id.model + "\n" + id.build + "\n" + id.cache_types;
  id.digest = Hex128(XXH3_128bits(all.data(), all.size()));
  return id;
}

Status CheckLibraryRelease() {
  const std::string version = ggml_version(), commit = ggml_commit();
  if (version != PREFIXD_LLAMA_GGML_VERSION || commit != PREFIXD_LLAMA_GGML_COMMIT) {
    return Status::InvalidArgument(
        "prefixd was built against llama.cpp's ggml " PREFIXD_LLAMA_GGML_VERSION
        " (" PREFIXD_LLAMA_GGML_COMMIT ") but the library loaded is ggml " +
        version + " (" + commit + "): rebuild prefixd against the llama.cpp it runs with");
  }
  return Status::Ok();
}

}  // namespace prefixd::llama
