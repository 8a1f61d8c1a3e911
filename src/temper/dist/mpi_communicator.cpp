#include "temper/dist/mpi_communicator.h"

#define OMPI_SKIP_MPICXX 1  // the C API only (the deprecated C++ bindings need libmpi_cxx)
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

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
  Timed(int64_t& bytes, double& seconds, int64_t n) : seconds_(seconds), t0_(std::chrono::steady_clock::now()) {
    bytes += n;
  }
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
    init(MPI_COMM_WORLD);
  }
  // A sub-group (split): freed with the object, before MPI_Finalize (the world's object outlives it).
  explicit Mpi(MPI_Comm comm) : sub_(true) { init(comm); }
  ~Mpi() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (sub_ && !finalized) wait_sends(), MPI_Comm_free(&comm_);
    if (owns_ && !finalized) MPI_Finalize();
  }
  std::unique_ptr<Communicator> split(int color, int key) override {
    MPI_Comm sub;
    check(MPI_Comm_split(comm_, color, key, &sub), "comm split");
    auto g = std::make_unique<Mpi>(sub);
    g->local_size_ = local_size_;  // the machine's ranks share its cores, whichever group they are in
    return g;
  }
  void send(const std::string& bytes, int dest, int tag) override {
    Timed t(bytes_, seconds_, static_cast<int64_t>(bytes.size()));
    const int64_t n = static_cast<int64_t>(bytes.size());
    check(MPI_Send(&n, 1, MPI_INT64_T, dest, tag, comm_), "send");
    for (int64_t i = 0; i < n; i += kBucketBytes)
      check(MPI_Send(bytes.data() + i, static_cast<int>(std::min(kBucketBytes, n - i)), MPI_BYTE, dest, tag, comm_),
            "send");
  }
  void recv(std::string& bytes, int src, int tag) override {
    Timed t(bytes_, seconds_, 0);
    int64_t n = 0;
    check(MPI_Recv(&n, 1, MPI_INT64_T, src, tag, comm_, MPI_STATUS_IGNORE), "recv");
    bytes.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i += kBucketBytes)
      check(MPI_Recv(bytes.data() + i, static_cast<int>(std::min(kBucketBytes, n - i)), MPI_BYTE, src, tag, comm_,
                     MPI_STATUS_IGNORE),
            "recv");
  }
  void send(const float* data, int64_t n, int dest, int tag) override {
    isend(data, n, dest, tag);
    wait_sends();
  }
  void isend(const float* data, int64_t n, int dest, int tag) override {
    bytes_ += n * static_cast<int64_t>(sizeof(float));
    const int64_t step = kBucketBytes / static_cast<int64_t>(sizeof(float));
    for (int64_t i = 0; i < n; i += step) {
      sends_.emplace_back();
      check(MPI_Isend(data + i, static_cast<int>(std::min(step, n - i)), MPI_FLOAT, dest, tag, comm_, &sends_.back()),
            "isend");
    }
  }
  void wait_sends() override {
    if (sends_.empty()) return;
    Timed t(bytes_, seconds_, 0);
    check(MPI_Waitall(static_cast<int>(sends_.size()), sends_.data(), MPI_STATUSES_IGNORE), "wait for sends");
    sends_.clear();
  }
  void recv(float* data, int64_t n, int src, int tag) override {
    Timed t(bytes_, seconds_, 0);
    const int64_t step = kBucketBytes / static_cast<int64_t>(sizeof(float));
    for (int64_t i = 0; i < n; i += step)
      check(MPI_Recv(data + i, static_cast<int>(std::min(step, n - i)), MPI_FLOAT, src, tag, comm_, MPI_STATUS_IGNORE),
            "recv");
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
      check(MPI_Bcast(data + i, static_cast<int>(std::min(step, n - i)), MPI_FLOAT, root, comm_), "broadcast");
  }
  void broadcast(std::string& bytes, int root) override {
    Timed t(bytes_, seconds_, rank_ == root ? static_cast<int64_t>(bytes.size()) : 0);
    int64_t n = static_cast<int64_t>(bytes.size());
    check(MPI_Bcast(&n, 1, MPI_INT64_T, root, comm_), "broadcast");
    bytes.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i += kBucketBytes)
      check(MPI_Bcast(bytes.data() + i, static_cast<int>(std::min(kBucketBytes, n - i)), MPI_BYTE, root, comm_),
            "broadcast");
  }
  std::vector<std::string> allgather(const std::string& bytes) override {
    const int64_t mine = static_cast<int64_t>(bytes.size());
    Timed t(bytes_, seconds_, mine);
    std::vector<int64_t> lens(static_cast<size_t>(size_));
    check(MPI_Allgather(&mine, 1, MPI_INT64_T, lens.data(), 1, MPI_INT64_T, comm_), "allgather");
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
    check(MPI_Allgatherv(bytes.data(), static_cast<int>(mine), MPI_BYTE, all.data(), counts.data(), displs.data(),
                         MPI_BYTE, comm_),
          "allgather");
    std::vector<std::string> out(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r)
      out[static_cast<size_t>(r)] = all.substr(static_cast<size_t>(displs[static_cast<size_t>(r)]),
                                               static_cast<size_t>(counts[static_cast<size_t>(r)]));
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
      check(MPI_Reduce_scatter(data + b, mine.data(), counts.data(), MPI_FLOAT, MPI_SUM, comm_), "reduce-scatter");
      std::copy(mine.begin(), mine.begin() + counts[me], data + b + displs[me]);
    }
  }
  void allgather_pieces(float* data, int64_t n) override {
    Timed t(bytes_, seconds_, n * static_cast<int64_t>(sizeof(float)) / size_);
    std::vector<int> counts, displs;
    for (int64_t b = 0; b < n; b += kShardBucket) {
      bucket_layout(b, n, counts, displs);
      check(
          MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data + b, counts.data(), displs.data(), MPI_FLOAT, comm_),
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
                        MPI_FLOAT, root, comm_),
            "gather");
      at += mine;
    }
  }
  void barrier() override {
    Timed t(bytes_, seconds_, 0);
    check(MPI_Barrier(comm_), "barrier");
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
      check(MPI_Allreduce(MPI_IN_PLACE, p + static_cast<size_t>(i) * elem, static_cast<int>(std::min(step, n - i)),
                          type, op, comm_),
            "all-reduce");
  }

  void init(MPI_Comm comm) {
    comm_ = comm;
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm local;
    check(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local), "comm split");
    MPI_Comm_size(local, &local_size_);
    MPI_Comm_free(&local);
  }

  MPI_Comm comm_ = MPI_COMM_WORLD;
  int rank_ = 0, size_ = 1, local_size_ = 1;
  bool owns_ = false, sub_ = false;
  std::vector<MPI_Request> sends_;  // isend's requests in flight
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_world() {
  return std::make_unique<Mpi>();
}

}  // namespace temper::dist
