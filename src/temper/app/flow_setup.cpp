#include "temper/app/flow_setup.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "temper/core/error.h"
#include "temper/core/tensor.h"
#include "temper/flow/density_grid.h"
#include "temper/flow/png.h"

namespace fs = std::filesystem;

namespace temper::app {

void FlowSetup::read(Recipe& r) {
  data_kind = r.get_choice("data.kind", data_kind, flow::data_kinds());
  data = flow::make_data_kind(data_kind);
  read_section(r, "data.", [&](KeyVisitor& v) { data->visit(v); });
  read_section(r, "features.", [&](KeyVisitor& v) { data->visit_features(v); });
  model_kind = r.get_choice("model.kind", model_kind, flow::model_kinds());
  model = flow::make_model_kind(model_kind);
  read_section(r, "model.", [&](KeyVisitor& v) { model->visit(v); });
}

std::unique_ptr<flow::VelocityModel> make_model(const FlowSetup& s, const flow::DataSource& data) {
  return s.model->make(data);
}

FlowParts build_flow(const FlowSetup& s) {
  FlowParts p;
  p.data = s.data->make();
  p.features = s.data->features(*p.data);
  p.model = make_model(s, *p.data);
  return p;
}

std::vector<std::pair<std::string, std::vector<float>>> model_tensors(const flow::VelocityModel& m,
                                                                      const std::string& prefix) {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  const auto p = m.params();
  size_t off = 0;
  for (const auto& [name, shape] : m.param_shapes()) {
    size_t n = 1;
    for (int64_t s : shape) n *= static_cast<size_t>(s);
    out.emplace_back(prefix + name, std::vector<float>(p.begin() + static_cast<std::ptrdiff_t>(off),
                                                       p.begin() + static_cast<std::ptrdiff_t>(off + n)));
    off += n;
  }
  TEMPER_CHECK(off == p.size()) << "model tensors: param_shapes cover " << off << " of " << p.size() << " parameters";
  return out;
}

void load_model_tensors(flow::VelocityModel& m, const SideCheckpoint& c, const std::string& prefix) {
  auto p = m.params();
  size_t off = 0;
  for (const auto& [name, shape] : m.param_shapes()) {
    const std::vector<float>& t = c.tensor(prefix + name);
    size_t n = 1;
    for (int64_t s : shape) n *= static_cast<size_t>(s);
    TEMPER_CHECK(t.size() == n) << (c.from.empty() ? std::string("checkpoint") : c.from) << ": tensor '" << prefix
                                << name << "' has " << t.size() << " values, the model's recipe gives " << n
                                << " (a checkpoint of another model shape?)";
    std::copy(t.begin(), t.end(), p.begin() + static_cast<std::ptrdiff_t>(off));
    off += n;
  }
}

namespace {
// 2-D samples over the true density (grey), one colour per class, on a square canvas.
flow::Pixels scatter(const flow::Toy2d& truth, const std::vector<float>& x, const std::vector<int32_t>& y) {
  constexpr int64_t kSize = 320;
  const double half = flow::grid_half_width(truth.config()), scale = kSize / (2 * half);
  flow::Pixels p;
  p.width = p.height = kSize, p.channels = 3;
  p.data.assign(static_cast<size_t>(kSize * kSize * 3), 255);
  double top = 0;
  std::vector<double> dens(static_cast<size_t>(kSize * kSize));
  for (int64_t r = 0; r < kSize; ++r)
    for (int64_t c = 0; c < kSize; ++c) {
      const double a = -half + (static_cast<double>(c) + 0.5) / scale,
                   b = half - (static_cast<double>(r) + 0.5) / scale;
      dens[static_cast<size_t>(r * kSize + c)] = std::exp(truth.log_density(a, b));
      top = std::max(top, dens[static_cast<size_t>(r * kSize + c)]);
    }
  for (size_t i = 0; i < dens.size(); ++i) {
    const auto g = static_cast<uint8_t>(255 - std::lround(70 * std::sqrt(dens[i] / top)));
    p.data[3 * i] = p.data[3 * i + 1] = p.data[3 * i + 2] = g;
  }
  static const uint8_t kColours[6][3] = {{31, 119, 180},  {214, 39, 40},  {44, 160, 44},
                                         {148, 103, 189}, {255, 127, 14}, {23, 190, 207}};
  for (size_t i = 0; i < y.size(); ++i) {
    const auto c = static_cast<int64_t>(std::floor((x[2 * i] + half) * scale));
    const auto r = static_cast<int64_t>(std::floor((half - x[2 * i + 1]) * scale));
    const uint8_t* col = kColours[static_cast<size_t>(y[i]) % 6];
    for (int64_t dr = 0; dr < 2; ++dr)
      for (int64_t dc = 0; dc < 2; ++dc) {
        const int64_t rr = r + dr, cc = c + dc;
        if (rr < 0 || cc < 0 || rr >= kSize || cc >= kSize) continue;
        for (int k = 0; k < 3; ++k) p.data[static_cast<size_t>((rr * kSize + cc) * 3 + k)] = col[k];
      }
  }
  return p;
}
}  // namespace

void write_samples_png(const flow::DataSource& data, const std::vector<float>& x, const std::vector<int32_t>& y,
                       const std::string& path) {
  if (!fs::path(path).parent_path().empty()) fs::create_directories(fs::path(path).parent_path());
  if (const flow::Toy2d* truth = data.known()) {
    flow::png_write(path, scatter(*truth, x, y));
    return;
  }
  const std::vector<int64_t> shape = data.image_shape();
  TEMPER_CHECK(shape.size() == 3 && shape[1] == shape[2])
      << "write_samples_png: data '" << data.name() << "' is neither 2-D nor images";
  // One row per class (up to 8 images each), in label order.
  constexpr int64_t kCols = 8;
  const int64_t dim = data.dim();
  std::vector<float> grid;
  int64_t n = 0;
  for (int32_t c = 0; c < data.classes(); ++c) {
    int64_t placed = 0;
    for (size_t i = 0; i < y.size() && placed < kCols; ++i)
      if (y[i] == c) {
        grid.insert(grid.end(), x.begin() + static_cast<std::ptrdiff_t>(i) * dim,
                    x.begin() + static_cast<std::ptrdiff_t>(i + 1) * dim);
        ++placed;
      }
    for (; placed > 0 && placed < kCols; ++placed) grid.insert(grid.end(), static_cast<size_t>(dim), 1.f);  // blank
    n = static_cast<int64_t>(grid.size()) / dim;
  }
  TEMPER_CHECK(n > 0) << "write_samples_png: no samples to draw";
  flow::png_write(path, flow::image_grid(grid.data(), n, shape[0], shape[1], kCols));
}

}  // namespace temper::app
