#include "temper/dist/communicator.h"

#include <algorithm>
#include <cstdlib>

#include "temper/core/error.h"
#include "temper/dist/mpi_communicator.h"

namespace temper::dist {

void SingleProcess::abort(int code) {
  std::_Exit(code);
}

std::vector<std::pair<int64_t, int64_t>> Communicator::pieces(int64_t n) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  const int64_t r = rank(), N = size();
  for (int64_t b = 0; b < n; b += kShardBucket) {
    const auto [lo, hi] = piece_of(std::min(kShardBucket, n - b), r, N);
    if (hi > lo) out.emplace_back(b + lo, hi - lo);
  }
  return out;
}

// The one-process defaults (MPI overrides them).
void Communicator::reduce_scatter_sum(float*, int64_t) {
  TEMPER_CHECK(size() == 1) << backend() << ": reduce_scatter_sum is not implemented for " << size() << " ranks";
}
void Communicator::allgather_pieces(float*, int64_t) {
  TEMPER_CHECK(size() == 1) << backend() << ": allgather_pieces is not implemented for " << size() << " ranks";
}
void Communicator::gather_pieces(const float* packed, float* full, int64_t n, int) {
  TEMPER_CHECK(size() == 1) << backend() << ": gather_pieces is not implemented for " << size() << " ranks";
  if (packed != full) std::copy(packed, packed + n, full);
}

std::unique_ptr<Communicator> Communicator::split(int, int) {
  TEMPER_CHECK(size() == 1) << backend() << ": split is not implemented for " << size() << " ranks";
  return std::make_unique<SingleProcess>();
}
void Communicator::send(const std::string&, int dest, int) {
  TEMPER_FAIL() << backend() << ": send to rank " << dest << ": point-to-point needs MPI (a group of " << size() << ")";
}
void Communicator::recv(std::string&, int src, int) {
  TEMPER_FAIL() << backend() << ": recv from rank " << src << ": point-to-point needs MPI (a group of " << size()
                << ")";
}
void Communicator::send(const float*, int64_t, int dest, int) {
  TEMPER_FAIL() << backend() << ": send to rank " << dest << ": point-to-point needs MPI (a group of " << size() << ")";
}
void Communicator::isend(const float*, int64_t, int dest, int) {
  TEMPER_FAIL() << backend() << ": isend to rank " << dest << ": point-to-point needs MPI (a group of " << size()
                << ")";
}
void Communicator::recv(float*, int64_t, int src, int) {
  TEMPER_FAIL() << backend() << ": recv from rank " << src << ": point-to-point needs MPI (a group of " << size()
                << ")";
}

namespace {
constexpr const char* kMpiLaunchVariables[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};
}  // namespace

bool launched_by_mpi() {
  for (const char* v : kMpiLaunchVariables)
    if (const char* s = std::getenv(v); s && *s) return true;
  return false;
}

void forget_mpi_launch() {
  for (const char* v : kMpiLaunchVariables) ::unsetenv(v);
}

bool mpi_available() {
#ifdef TEMPER_WITH_MPI
  return true;
#else
  return false;
#endif
}

int local_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char* e = std::getenv(v)) return std::atoi(e);
  return 0;
}

Communicator& single() {
  static SingleProcess s;
  return s;
}

Communicator& world() {
#ifdef TEMPER_WITH_MPI
  if (launched_by_mpi()) {
    static std::unique_ptr<Communicator> mpi = make_mpi_world();
    return *mpi;
  }
#endif
  return single();
}

namespace {
std::unique_ptr<Communicator>& group_slot() {
  static std::unique_ptr<Communicator> g;
  return g;
}
Role& role_slot() {
  static Role r;
  return r;
}
}  // namespace

Communicator& group() {
  return group_slot() ? *group_slot() : world();
}
const Role& role() {
  return role_slot();
}
void set_group(std::unique_ptr<Communicator> g, Role r) {
  group_slot() = std::move(g), role_slot() = r;
}

Range shard(int64_t n, int rank, int size) {
  return {n * rank / size, n * (rank + 1) / size};
}

std::vector<int> ranks_unlike_root(Communicator& c, const std::string& bytes) {
  const std::vector<std::string> all = c.allgather(bytes);
  std::vector<int> unlike;
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) unlike.push_back(static_cast<int>(r));
  return unlike;
}

}  // namespace temper::dist
