#include "temper/app/convert.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "temper/app/model_source.h"
#include "temper/core/error.h"
#include "temper/io/hf_model_dir.h"

namespace temper::app {
namespace {
std::string slurp(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream in(path, std::ios::binary);
  TEMPER_CHECK(in.good()) << path << ": cannot open";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

int convert(const ConvertOptions& o) {
  LoadedModel lm = load_model(o.in);
  bool to_gguf = o.out.size() > 5 && o.out.compare(o.out.size() - 5, 5, ".gguf") == 0;
  TEMPER_CHECK(!to_gguf) << o.out << ": GGUF export is not built yet; give a directory for a Hugging Face export";
  io::HfExportOptions x;
  TEMPER_CHECK(dtype_from_name(o.dtype, &x.dtype) &&
               (x.dtype == DType::f32 || x.dtype == DType::bf16 || x.dtype == DType::f16))
      << "--dtype for a Hugging Face export must be f32, bf16 or f16, got '" << o.dtype << "'";
  x.eos_ids = lm.eos_ids;
  x.bos_id = lm.bos_id;
  x.tokenizer_json_text = slurp(lm.tokenizer_json);
  x.tokenizer_config_json_text = slurp(lm.tokenizer_config_json);
  io::export_hf_dir(*lm.model, o.out, x);
  std::fprintf(stderr, "temper convert: %s (%s) -> %s (Hugging Face, %s)\n", o.in.c_str(), lm.format.c_str(),
               o.out.c_str(), o.dtype.c_str());
  return 0;
}

}  // namespace temper::app
