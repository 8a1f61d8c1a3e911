// cuBLASLt GEMMs for temper's row-major layouts. See gemm.h for the orientation mapping.
#include "temper/kernels/cuda/gemm.h"

#include <dlfcn.h>

#include <algorithm>
#include <sstream>

#include "temper/core/error.h"

namespace temper::cuda {

namespace {

// cuBLASLt is opened on first use (dlopen), not linked: loading it costs ~0.1 s and ~200 MB of
// resident memory in its initialisers, which every CPU-only temper command would otherwise pay.
struct LtApi {
#define TEMPER_LT_FN(name) decltype(&::name) name = nullptr;
  TEMPER_LT_FN(cublasLtCreate)
  TEMPER_LT_FN(cublasLtDestroy)
  TEMPER_LT_FN(cublasLtMatmulDescCreate)
  TEMPER_LT_FN(cublasLtMatmulDescDestroy)
  TEMPER_LT_FN(cublasLtMatmulDescSetAttribute)
  TEMPER_LT_FN(cublasLtMatrixLayoutCreate)
  TEMPER_LT_FN(cublasLtMatrixLayoutDestroy)
  TEMPER_LT_FN(cublasLtMatmulPreferenceCreate)
  TEMPER_LT_FN(cublasLtMatmulPreferenceDestroy)
  TEMPER_LT_FN(cublasLtMatmulPreferenceSetAttribute)
  TEMPER_LT_FN(cublasLtMatmulAlgoGetHeuristic)
  TEMPER_LT_FN(cublasLtMatmul)
#undef TEMPER_LT_FN
};

const LtApi& lt() {
  static const LtApi api = [] {
    LtApi a;
    void* h = nullptr;
    std::string tried;
    for (const char* name : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) {
      h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (h) break;
      tried += std::string(tried.empty() ? "" : ", ") + name;
    }
    TEMPER_CHECK(h) << "cannot open cuBLASLt (tried " << tried << "): put the CUDA toolkit's lib64 (or the "
                    << "nvidia-cublas wheel's lib) on LD_LIBRARY_PATH";
#define TEMPER_LT_LOAD(name)                                                  \
  a.name = reinterpret_cast<decltype(a.name)>(dlsym(h, #name));               \
  TEMPER_CHECK(a.name) << "cuBLASLt has no symbol " #name " (too old a version?)";
    TEMPER_LT_LOAD(cublasLtCreate)
    TEMPER_LT_LOAD(cublasLtDestroy)
    TEMPER_LT_LOAD(cublasLtMatmulDescCreate)
    TEMPER_LT_LOAD(cublasLtMatmulDescDestroy)
    TEMPER_LT_LOAD(cublasLtMatmulDescSetAttribute)
    TEMPER_LT_LOAD(cublasLtMatrixLayoutCreate)
    TEMPER_LT_LOAD(cublasLtMatrixLayoutDestroy)
    TEMPER_LT_LOAD(cublasLtMatmulPreferenceCreate)
    TEMPER_LT_LOAD(cublasLtMatmulPreferenceDestroy)
    TEMPER_LT_LOAD(cublasLtMatmulPreferenceSetAttribute)
    TEMPER_LT_LOAD(cublasLtMatmulAlgoGetHeuristic)
    TEMPER_LT_LOAD(cublasLtMatmul)
#undef TEMPER_LT_LOAD
    return a;
  }();
  return api;
}

void lt_check(cublasStatus_t s, const char* what, const char* file, int line) {
  if (s != CUBLAS_STATUS_SUCCESS) fail(static_cast<int>(s), "cuBLASLt status", what, file, line);
}
#define TEMPER_LT(call) lt_check((call), #call, __FILE__, __LINE__)

cudaDataType_t data_type(GemmType t) { return t == GemmType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

// The largest power of two (up to 256, cuBLASLt's default assumption) dividing the address: a plan
// chosen for 256-byte-aligned operands must not run on a weight or chunk pointer that is less aligned.
uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 256;
  while (al > 1 && (a % al) != 0) al >>= 1;
  return al;
}

}  // namespace

struct Blas::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLAS's A (our B), B (our A), C
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (a) lt().cublasLtMatrixLayoutDestroy(a);
    if (b) lt().cublasLtMatrixLayoutDestroy(b);
    if (c) lt().cublasLtMatrixLayoutDestroy(c);
    if (desc) lt().cublasLtMatmulDescDestroy(desc);
  }
};

Blas::Blas(cudaStream_t stream, size_t workspace_bytes) : stream_(stream), workspace_(workspace_bytes) {
  TEMPER_LT(lt().cublasLtCreate(&handle_));
}

Blas::~Blas() {
  plans_.clear();
  if (handle_) lt().cublasLtDestroy(handle_);
}

Blas::Plan& Blas::plan(const GemmArgs& g) {
  Key key{g.trans_a,
          g.trans_b,
          g.M,
          g.N,
          g.K,
          g.lda,
          g.ldb,
          g.ldc,
          static_cast<int>(g.ab_type),
          static_cast<int>(g.c_type),
          g.bias != nullptr,
          g.allow_tf32,
          g.beta != 0.f,
          alignment(g.A),
          alignment(g.B),
          std::min(alignment(g.C), g.C_in ? alignment(g.C_in) : 256u)};
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  auto p = std::make_unique<Plan>();
  cublasComputeType_t compute =
      (g.ab_type == GemmType::f32 && g.allow_tf32) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  TEMPER_LT(lt().cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F));
  // cuBLAS computes C^T[N, M] = opA(ours B) * opB(ours A), column-major.
  cublasOperation_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  TEMPER_LT(lt().cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
  TEMPER_LT(lt().cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
  if (g.bias) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    TEMPER_LT(lt().cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    cudaDataType_t bt = CUDA_R_32F;
    TEMPER_LT(lt().cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
  }
  cudaDataType_t ab = data_type(g.ab_type), ct = data_type(g.c_type);
  // Stored matrices as column-major: a row-major R x C matrix with row stride ld is C x R with ld.
  if (g.trans_b)
    TEMPER_LT(lt().cublasLtMatrixLayoutCreate(&p->a, ab, g.K, g.N, g.ldb));  // B stored [N, K]
  else
    TEMPER_LT(lt().cublasLtMatrixLayoutCreate(&p->a, ab, g.N, g.K, g.ldb));  // B stored [K, N]
  if (g.trans_a)
    TEMPER_LT(lt().cublasLtMatrixLayoutCreate(&p->b, ab, g.M, g.K, g.lda));  // A stored [K, M]
  else
    TEMPER_LT(lt().cublasLtMatrixLayoutCreate(&p->b, ab, g.K, g.M, g.lda));  // A stored [M, K]
  TEMPER_LT(lt().cublasLtMatrixLayoutCreate(&p->c, ct, g.N, g.M, g.ldc));

  cublasLtMatmulPreference_t pref = nullptr;
  TEMPER_LT(lt().cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = workspace_.bytes();
  TEMPER_LT(lt().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const uint32_t al_a = alignment(g.B), al_b = alignment(g.A), al_c = std::get<15>(key);  // cuBLAS's A is our B
  TEMPER_LT(lt().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
  TEMPER_LT(lt().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
  TEMPER_LT(lt().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c)));
  TEMPER_LT(lt().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof(al_c)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t s = lt().cublasLtMatmulAlgoGetHeuristic(handle_, p->desc, p->a, p->b, p->c, p->c, pref, 1, &result, &found);
  lt().cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
    std::ostringstream os;
    os << "cuBLASLt has no algorithm for the GEMM M=" << g.M << " N=" << g.N << " K=" << g.K
       << " (ab=" << (g.ab_type == GemmType::bf16 ? "bf16" : "f32") << ", c=" << (g.c_type == GemmType::bf16 ? "bf16" : "f32")
       << ", lda=" << g.lda << " ldb=" << g.ldb << " ldc=" << g.ldc << "); bf16 needs strides that are multiples of 8";
    throw Error(os.str());
  }
  p->algo = result.algo;
  return *(plans_[key] = std::move(p));
}

void Blas::gemm(const GemmArgs& g) {
  TEMPER_CHECK(g.M > 0 && g.N > 0 && g.K > 0) << "gemm: empty shape M=" << g.M << " N=" << g.N << " K=" << g.K;
  TEMPER_CHECK(!g.bias || g.c_type == GemmType::f32) << "gemm: the bias epilogue needs an f32 output";
  TEMPER_CHECK(g.ldc >= g.N && g.lda >= (g.trans_a ? g.M : g.K) && g.ldb >= (g.trans_b ? g.K : g.N))
      << "gemm: a row stride is shorter than its row (lda " << g.lda << ", ldb " << g.ldb << ", ldc " << g.ldc << ")";
  Plan& p = plan(g);
  if (g.bias)
    TEMPER_LT(lt().cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias)));
  TEMPER_LT(lt().cublasLtMatmul(handle_, p.desc, &g.alpha, g.B, p.a, g.A, p.b, &g.beta, g.C_in ? g.C_in : g.C, p.c, g.C,
                                p.c, &p.algo, workspace_.data(), workspace_.bytes(), stream_));
}

}  // namespace temper::cuda
