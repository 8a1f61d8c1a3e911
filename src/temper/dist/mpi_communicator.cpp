#include "temper/dist/mpi_communicator.h"

#define OMPI_SKIP_MPICXX 1  // the C API only (the deprecated C++ bindings need libmpi_cxx)
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "temper/core/error.h"

namespace temper::dist {

namespace {

constexpr int64_t kBucketBytes = 64ll << 20;  // all-reduce buckets: bounded MPI counts and memory

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  TEMPER_FAIL() << "MPI " << what << " failed: " << std::string(msg, static_cast<size_t>(len));
}

// Counts a collective's payload and wall time into the communicator's totals.
class Timed {
 public:
  Timed(int64_t& bytes, double& seconds, int64_t n) : seconds_(seconds), t0_(std::chrono::steady_clock::now()) { bytes += n; }
  ~Timed() { seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

 private:
  double& seconds_;
  std::chrono::steady_clock::time_point t0_;
};

class Mpi final : public Communicator {
 public:
  Mpi() {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "init");
      owns_ = true;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm local;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local), "comm split");
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
  }
  ~Mpi() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_ && !finalized) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }
  const char* backend() const override { return "mpi"; }

  void allreduce_sum(float* data, int64_t n) override { reduce(data, n, MPI_FLOAT, MPI_SUM, sizeof(float)); }
  void allreduce_sum(double* data, int64_t n) override { reduce(data, n, MPI_DOUBLE, MPI_SUM, sizeof(double)); }
  void allreduce_max(double* data, int64_t n) override { reduce(data, n, MPI_DOUBLE, MPI_MAX, sizeof(double)); }

  void broadcast(float* data, int64_t n, int root) override {
    Timed t(bytes_, seconds_, rank_ == root ? n * static_cast<int64_t>(sizeof(float)) : 0);
    const int64_t step = kBucketBytes / static_cast<int64_t>(sizeof(float));
    for (int64_t i = 0; i < n; i += step)
      check(MPI_Bcast(data + i, static_cast<int>(std::min(step, n - i)), MPI_FLOAT, root, MPI_COMM_WORLD), "broadcast");
  }
  void broadcast(std::string& bytes, int root) override {
    Timed t(bytes_, seconds_, rank_ == root ? static_cast<int64_t>(bytes.size()) : 0);
    int64_t n = static_cast<int64_t>(bytes.size());
    check(MPI_Bcast(&n, 1, MPI_INT64_T, root, MPI_COMM_WORLD), "broadcast");
    bytes.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i += kBucketBytes)
      check(MPI_Bcast(bytes.data() + i, static_cast<int>(std::min(kBucketBytes, n - i)), MPI_BYTE, root, MPI_COMM_WORLD), "broadcast");
  }
  std::vector<std::string> allgather(const std::string& bytes) override {
    const int64_t mine = static_cast<int64_t>(bytes.size());
    Timed t(bytes_, seconds_, mine);
    std::vector<int64_t> lens(static_cast<size_t>(size_));
    check(MPI_Allgather(&mine, 1, MPI_INT64_T, lens.data(), 1, MPI_INT64_T, MPI_COMM_WORLD), "allgather");
    int64_t total = 0;
    for (int64_t l : lens) total += l;
    TEMPER_CHECK(total < (int64_t{1} << 31)) << "MPI allgather: " << total << " bytes in one call (the limit is 2 GiB)";
    std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
    for (int r = 0, off = 0; r < size_; ++r) {
      counts[static_cast<size_t>(r)] = static_cast<int>(lens[static_cast<size_t>(r)]);
      displs[static_cast<size_t>(r)] = off;
      off += counts[static_cast<size_t>(r)];
    }
    std::string all(static_cast<size_t>(total), '\0');
    check(MPI_Allgatherv(bytes.data(), static_cast<int>(mine), MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE,
                         MPI_COMM_WORLD),
          "allgather");
    std::vector<std::string> out(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r)
      out[static_cast<size_t>(r)] = all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]), static_cast<size_t>(counts[static_cast<size_t>(r)]));
    return out;
  }
  // Per bucket: counts and displacements (from the bucket's start) of every rank's piece.
  void bucket_layout(int64_t b, int64_t n, std::vector<int>& counts, std::vector<int>& displs) const {
    const int64_t L = std::min(kShardBucket, n - b);
    counts.resize(static_cast<size_t>(size_));
    displs.resize(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      const auto [lo, hi] = piece_of(L, r, size_);
      counts[static_cast<size_t>(r)] = static_cast<int>(hi - lo);
      displs[static_cast<size_t>(r)] = static_cast<int>(lo);
    }
  }
  void reduce_scatter_sum(float* data, int64_t n) override {
    Timed t(bytes_, seconds_, n * static_cast<int64_t>(sizeof(float)));
    std::vector<int> counts, displs;
    std::vector<float> mine;
    for (int64_t b = 0; b < n; b += kShardBucket) {
      bucket_layout(b, n, counts, displs);
      const size_t me = static_cast<size_t>(rank_);
      mine.resize(static_cast<size_t>(std::max(1, counts[me])));
      check(MPI_Reduce_scatter(data + b, mine.data(), counts.data(), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
            "reduce-scatter");
      std::copy(mine.begin(), mine.begin() + counts[me], data + b + displs[me]);
    }
  }
  void allgather_pieces(float* data, int64_t n) override {
    Timed t(bytes_, seconds_, n * static_cast<int64_t>(sizeof(float)) / size_);
    std::vector<int> counts, displs;
    for (int64_t b = 0; b < n; b += kShardBucket) {
      bucket_layout(b, n, counts, displs);
      check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data + b, counts.data(), displs.data(), MPI_FLOAT,
                           MPI_COMM_WORLD),
            "all-gather");
    }
  }
  void gather_pieces(const float* packed, float* full, int64_t n, int root) override {
    std::vector<int> counts, displs;
    int64_t at = 0;  // this rank's offset in `packed`
    for (int64_t b = 0; b < n; b += kShardBucket) {
      bucket_layout(b, n, counts, displs);
      const int mine = counts[static_cast<size_t>(rank_)];
      Timed t(bytes_, seconds_, mine * static_cast<int64_t>(sizeof(float)));
      check(MPI_Gatherv(packed + at, mine, MPI_FLOAT, rank_ == root ? full + b : nullptr, counts.data(), displs.data(),
                        MPI_FLOAT, root, MPI_COMM_WORLD),
            "gather");
      at += mine;
    }
  }
  void barrier() override {
    Timed t(bytes_, seconds_, 0);
    check(MPI_Barrier(MPI_COMM_WORLD), "barrier");
  }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

 private:
  void reduce(void* data, int64_t n, MPI_Datatype type, MPI_Op op, size_t elem) {
    Timed t(bytes_, seconds_, n * static_cast<int64_t>(elem));
    const int64_t step = kBucketBytes / static_cast<int64_t>(elem);
    char* p = static_cast<char*>(data);
    for (int64_t i = 0; i < n; i += step)
      check(MPI_Allreduce(MPI_IN_PLACE, p + static_cast<size_t>(i) * elem, static_cast<int>(std::min(step, n - i)), type, op,
                          MPI_COMM_WORLD),
            "all-reduce");
  }

  int rank_ = 0, size_ = 1, local_size_ = 1;
  bool owns_ = false;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_world() { return std::make_unique<Mpi>(); }

}  // namespace temper::dist
