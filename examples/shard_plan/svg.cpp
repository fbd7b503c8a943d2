// SPDX-License-Identifier: MIT

#include "svg.hpp"

#include "text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace shard_plan {

namespace {

std::string xml_escape(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

constexpr std::array<std::string_view, 10> palette{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#17becf"};

constexpr std::string_view outside_fill = "#d4d4d4";

std::string_view color_of(std::int64_t rank) { return palette[static_cast<std::size_t>(rank) % palette.size()]; }

struct Layout {
  double left = 78;  // rank labels
  double top = 0;    // below the caption
  double row_height = 14;
  double row_gap = 4;
  double header = 20;  // each epoch's header line
  double group_gap = 10;
  double width = 1040;
  [[nodiscard]] double axis_width() const noexcept { return static_cast<double>(axis_pixels); }
};

// Spans of consecutive bins for which `on(bin)` holds, as [first, last] bin pairs.
template <class F>
std::vector<std::pair<std::size_t, std::size_t>> bin_runs(std::size_t count, F on) {
  std::vector<std::pair<std::size_t, std::size_t>> runs;
  for (std::size_t i = 0; i < count;) {
    if (!on(i)) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j + 1 < count && on(j + 1)) ++j;
    runs.emplace_back(i, j);
    i = j + 1;
  }
  return runs;
}

// Where everything goes: the layout, the axis's scale and the heights of the parts.
struct Canvas {
  Layout l;
  const Bins& bins;
  double scale = 1;
  std::size_t n_ranks = 0;
  double group_height = 0;
  double axis_y = 0;

  Canvas(const Picture& pic, std::size_t caption_lines) : bins(pic.bins) {
    std::size_t longest_note = 0;
    for (const Row& row : pic.rows) longest_note = std::max(longest_note, row.note.size());
    l.width = std::max(l.width, l.left + l.axis_width() + 14 + 6.8 * static_cast<double>(longest_note));
    scale = l.axis_width() / static_cast<double>(bins.axis.size());
    n_ranks = pic.ranks.size();
    group_height =
        l.header + static_cast<double>(n_ranks) * l.row_height + static_cast<double>(n_ranks - 1) * l.row_gap;
    l.top = 30.0 + 16.0 * static_cast<double>(caption_lines) + 8.0;
    const double groups_bottom =
        l.top + static_cast<double>(pic.epochs.size()) * (group_height + l.group_gap) - l.group_gap;
    axis_y = groups_bottom + 14;
  }

  [[nodiscard]] double x_of(std::int64_t obs) const {
    return l.left + static_cast<double>(obs - bins.axis.start) * scale;
  }
  // A span narrower than a pixel is widened to one, so that a lone chunk stays visible.
  [[nodiscard]] double bin_x(std::size_t bin) const {
    const double x = x_of(bins.span(bin).start);
    return std::min(x, l.left + l.axis_width() - 1.0);
  }
  [[nodiscard]] double bin_end(std::size_t bin) const { return std::max(x_of(bins.span(bin).stop), bin_x(bin) + 1.0); }
  // A rectangle over bins [a, b] as a path: from y, `height` high.
  [[nodiscard]] std::string bins_path(std::size_t a, std::size_t b, double y, double height) const {
    return fmt::format("M{:.2f} {:.1f}h{:.2f}v{:.0f}h{:.2f}z", bin_x(a), y, bin_end(b) - bin_x(a), height,
                       bin_x(a) - bin_end(b));
  }
};

// The legend: one swatch per drawn rank, then the marks that appear.
struct Item {
  std::string kind;  // rank color, "loaded", "left", "repeated", "outside"
  std::string label;
};

std::vector<Item> legend_items(const Picture& pic) {
  bool any_loaded_only = false;
  bool any_repeated = false;
  bool any_left_out = false;
  for (const Row& row : pic.rows)
    for (std::size_t i = 0; i < row.loaded.size(); ++i) {
      any_loaded_only = any_loaded_only || (row.loaded[i] > 0 && row.read[i] * 2 < row.loaded[i]);
      any_repeated = any_repeated || row.repeated[i] > 0;
    }
  for (const auto& left : pic.left_out)
    for (const std::int64_t n : left) any_left_out = any_left_out || n > 0;
  const bool any_outside = std::find(pic.masked.begin(), pic.masked.end(), 0) != pic.masked.end();
  std::vector<Item> legend;
  for (const std::int64_t rank : pic.ranks)
    legend.push_back({std::string(color_of(rank)), fmt::format("rank {}", rank)});
  if (any_loaded_only) legend.push_back({"loaded", "loaded, read by another rank (shared request) or by none"});
  if (any_left_out) legend.push_back({"left", "left out: read by no rank"});
  if (any_repeated) legend.push_back({"repeated", "underlined: read again in the epoch (padding)"});
  if (any_outside) legend.push_back({"outside", "between the mask's ranges: never sampled"});
  return legend;
}

// Where each legend item goes, in lines that fit the width; and the document's height below them.
std::pair<std::vector<std::pair<double, double>>, double> place_legend(const std::vector<Item>& legend,
                                                                       const Canvas& c) {
  double legend_x = c.l.left;
  double legend_y = c.axis_y + 44;
  std::vector<std::pair<double, double>> legend_at;
  for (const Item& item : legend) {
    const double w = 22 + 6.3 * static_cast<double>(item.label.size()) + 18;
    if (legend_x + w > c.l.width - 10) {
      legend_x = c.l.left;
      legend_y += 20;
    }
    legend_at.emplace_back(legend_x, legend_y);
    legend_x += w;
  }
  return {legend_at, legend_y + 24};
}

std::string svg_head(const Canvas& c, double height, const std::vector<std::string>& caption) {
  std::string svg;
  svg += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} {:.0f}\" "
      "font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\" font-size=\"12\" shape-rendering=\"crispEdges\">\n",
      c.l.width, height, c.l.width, height);
  svg += fmt::format("<title>{}</title>\n", xml_escape(caption.front()));
  svg += "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#eeeeee\"/>"
         "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#888888\" stroke-width=\"2\"/></pattern></defs>\n";
  svg += fmt::format("<rect width=\"{:.0f}\" height=\"{:.0f}\" fill=\"#ffffff\"/>\n", c.l.width, height);
  for (std::size_t i = 0; i < caption.size(); ++i)
    svg += fmt::format("<text x=\"12\" y=\"{:.0f}\"{}>{}</text>\n", 22.0 + 16.0 * static_cast<double>(i),
                       i == 0 ? " font-size=\"15\" font-weight=\"bold\"" : " fill=\"#333333\"", xml_escape(caption[i]));
  return svg;
}

// One rank's row at height y: what it loaded, what it read, what it repeated, and its note.
std::string svg_row(const Canvas& c, const Row& row, std::int64_t rank, double y) {
  std::string svg;
  const std::string_view color = color_of(rank);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">rank {}</text>", c.l.left - 8, y + 11, rank);
  std::string path_light;
  std::string path_full;
  const auto read_bin = [&](std::size_t i) { return row.read[i] > 0 && row.read[i] * 2 >= row.loaded[i]; };
  for (const auto& [a, b] :
       bin_runs(row.loaded.size(), [&](std::size_t i) { return row.loaded[i] > 0 && !read_bin(i); }))
    path_light += c.bins_path(a, b, y, c.l.row_height);
  for (const auto& [a, b] : bin_runs(row.read.size(), read_bin)) path_full += c.bins_path(a, b, y, c.l.row_height);
  if (!path_light.empty()) svg += fmt::format("<path d=\"{}\" fill=\"{}\" fill-opacity=\"0.3\"/>", path_light, color);
  if (!path_full.empty()) svg += fmt::format("<path d=\"{}\" fill=\"{}\"/>", path_full, color);
  // Repeats underline the rows they repeat: a dark strip along the row's bottom.
  std::string path_repeated;
  for (const auto& [a, b] : bin_runs(row.repeated.size(), [&](std::size_t i) { return row.repeated[i] > 0; }))
    path_repeated += c.bins_path(a, b, y + c.l.row_height - 4, 4.0);
  if (!path_repeated.empty()) svg += fmt::format("<path d=\"{}\" fill=\"#111111\"/>", path_repeated);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#333333\">{}</text>\n", c.l.left + c.l.axis_width() + 8,
                     y + 11, xml_escape(row.note));
  return svg;
}

// Epoch `e`'s group: its header, the axis's extent, what it left out, and a row per rank.
std::string svg_epoch(const Canvas& c, const Picture& pic, std::size_t e) {
  std::string svg;
  const double gy = c.l.top + static_cast<double>(e) * (c.group_height + c.l.group_gap);
  const double rows_y = gy + c.l.header;
  const double rows_h = c.group_height - c.l.header;
  svg += fmt::format("<text x=\"12\" y=\"{:.1f}\" font-weight=\"bold\">epoch {}</text>", gy + 13, pic.epochs[e]);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#333333\">{}</text>\n", c.l.left, gy + 13,
                     xml_escape(pic.headers[e]));
  // The axis's extent, faintly, so that empty stretches read as such.
  svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#fafafa\" "
                     "stroke=\"#dddddd\"/>\n",
                     c.l.left, rows_y - 2, c.l.axis_width(), rows_h + 4);
  // Between the mask's ranges: bins that hold no row of the mask.
  for (const auto& [a, b] : bin_runs(pic.masked.size(), [&](std::size_t i) { return pic.masked[i] == 0; }))
    svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"{}\"/>\n", c.bin_x(a),
                       rows_y - 2, c.bin_end(b) - c.bin_x(a), rows_h + 4, outside_fill);
  const auto& left = pic.left_out[e];
  for (const auto& [a, b] : bin_runs(left.size(), [&](std::size_t i) { return left[i] > 0; }))
    svg += fmt::format("<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.1f}\" fill=\"url(#hatch)\"/>\n",
                       c.bin_x(a), rows_y - 2, c.bin_end(b) - c.bin_x(a), rows_h + 4);
  for (std::size_t r = 0; r < c.n_ranks; ++r) {
    const double y = rows_y + static_cast<double>(r) * (c.l.row_height + c.l.row_gap);
    svg += svg_row(c, pic.rows[e * c.n_ranks + r], pic.ranks[r], y);
  }
  return svg;
}

// The axis's ticks: the range's ends and round numbers between them, none crowding an end.
std::vector<std::int64_t> axis_ticks(const Bins& bins, double scale) {
  const std::int64_t span = bins.axis.size();
  const double raw = static_cast<double>(span) / 6.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(std::max(raw, 1.0))));
  double step_d = magnitude;
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step_d = m * magnitude;
      break;
    }
  const auto step = static_cast<std::int64_t>(std::min(step_d, static_cast<double>(span)));
  std::vector<std::int64_t> ticks{bins.axis.start};
  if (step > 0)
    for (std::int64_t t = (bins.axis.start / step + 1) * step; t < bins.axis.stop; t += step) {
      if (static_cast<double>(t - bins.axis.start) * scale < 36 || static_cast<double>(bins.axis.stop - t) * scale < 36)
        continue;
      ticks.push_back(t);
      if (t > bins.axis.stop - step) break;
    }
  ticks.push_back(bins.axis.stop);
  return ticks;
}

// The mask's ranges as a dark band along the axis, above it: a bin partly between ranges (gaps
// narrower than a bin) is drawn lighter, in four shades of the share of its rows in the mask.
std::string svg_mask(const Canvas& c, const Picture& pic) {
  std::string svg = fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#333333\">mask</text>",
                                c.l.left - 8, c.axis_y);
  const auto shade = [&](std::size_t i) {
    const auto share = static_cast<double>(pic.masked[i]) / static_cast<double>(c.bins.span(i).size());
    return pic.masked[i] == 0 ? 0 : share >= 0.999 ? 4 : share >= 2.0 / 3 ? 3 : share >= 1.0 / 3 ? 2 : 1;
  };
  for (int level = 1; level <= 4; ++level) {
    std::string path;
    for (const auto& [a, b] : bin_runs(pic.masked.size(), [&](std::size_t i) { return shade(i) == level; }))
      path += c.bins_path(a, b, c.axis_y - 8, 5.0);
    if (!path.empty())
      svg += fmt::format("<path d=\"{}\" fill=\"#555555\" fill-opacity=\"{:.2f}\"/>", path, level / 4.0);
  }
  return svg + "\n";
}

std::string svg_axis(const Canvas& c) {
  std::string svg;
  svg += fmt::format("<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#333333\"/>\n", c.l.left,
                     c.axis_y, c.l.left + c.l.axis_width(), c.axis_y);
  for (const std::int64_t t : axis_ticks(c.bins, c.scale)) {
    const double x = c.x_of(t);
    svg += fmt::format("<line x1=\"{:.2f}\" y1=\"{:.1f}\" x2=\"{:.2f}\" y2=\"{:.1f}\" stroke=\"#333333\"/>"
                       "<text x=\"{:.2f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                       x, c.axis_y, x, c.axis_y + 5, x, c.axis_y + 18, short_number(t));
  }
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"#333333\">observation</text>\n",
                     c.l.left + c.l.axis_width() / 2, c.axis_y + 33);
  return svg;
}

std::string svg_legend(const std::vector<Item>& legend, const std::vector<std::pair<double, double>>& legend_at) {
  std::string svg;
  for (std::size_t i = 0; i < legend.size(); ++i) {
    const auto [x, y] = legend_at[i];
    const Item& item = legend[i];
    if (item.kind == "loaded")
      svg +=
          fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"18\" height=\"12\" fill=\"{}\" fill-opacity=\"0.3\"/>",
                      x, y, palette[0]);
    else if (item.kind == "left")
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"18\" height=\"12\" fill=\"url(#hatch)\"/>", x, y);
    else if (item.kind == "outside")
      svg +=
          fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"18\" height=\"12\" fill=\"{}\"/>", x, y, outside_fill);
    else if (item.kind == "repeated")
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"18\" height=\"12\" fill=\"{}\"/><rect x=\"{:.1f}\" "
                         "y=\"{:.1f}\" width=\"18\" height=\"4\" fill=\"#111111\"/>",
                         x, y, palette[0], x, y + 8);
    else
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"18\" height=\"12\" fill=\"{}\"/>", x, y, item.kind);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", x + 24, y + 10, xml_escape(item.label));
  }
  return svg;
}

std::string render_svg(const Picture& pic, const std::vector<std::string>& caption) {
  const Canvas canvas(pic, caption.size());
  const std::vector<Item> legend = legend_items(pic);
  const auto [legend_at, height] = place_legend(legend, canvas);
  std::string svg = svg_head(canvas, height, caption);
  for (std::size_t e = 0; e < pic.epochs.size(); ++e) svg += svg_epoch(canvas, pic, e);
  // One range spans the whole axis: the band would say nothing.
  bool gaps = false;
  for (std::size_t i = 0; i < pic.masked.size(); ++i) gaps = gaps || pic.masked[i] < pic.bins.span(i).size();
  if (gaps) svg += svg_mask(canvas, pic);
  svg += svg_axis(canvas);
  svg += svg_legend(legend, legend_at);
  svg += "</svg>\n";
  return svg;
}

// Halves the picture's resolution: two bins become one.
void coarsen(Picture& pic) {
  const auto halve = [](std::vector<std::int64_t>& v) {
    const std::size_t n = (v.size() + 1) / 2;
    for (std::size_t i = 0; i < n; ++i) v[i] = v[2 * i] + (2 * i + 1 < v.size() ? v[2 * i + 1] : 0);
    v.resize(n);
  };
  for (Row& row : pic.rows) {
    halve(row.loaded);
    halve(row.read);
    halve(row.repeated);
  }
  for (auto& v : pic.left_out) halve(v);
  halve(pic.masked);
  pic.bins.width *= 2;
  pic.bins.count = examples::ceil_div(pic.bins.axis.size(), pic.bins.width);
}

}  // namespace

void write_svg(const std::string& path, Picture& pic, const std::vector<std::string>& caption) {
  std::string svg = render_svg(pic, caption);
  while (svg.size() > max_svg_bytes && pic.bins.count > 50) {
    coarsen(pic);
    svg = render_svg(pic, caption);
  }
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) throw std::runtime_error(fmt::format("--svg: cannot open {:?} for writing", path));
  const bool written = std::fwrite(svg.data(), 1, svg.size(), file) == svg.size();
  if (std::fclose(file) != 0 || !written) throw std::runtime_error(fmt::format("--svg: cannot write {:?}", path));
  fmt::print("picture   {} ({} bytes): {}, {} of {}{}\n", path, svg.size(),
             pic.epochs.size() == 1 ? std::string("epoch 0") : fmt::format("epochs 0-{}", pic.epochs.back()),
             counted(std::ssize(pic.ranks), "rank", "ranks"), pic.ranks.back() + 1,
             pic.bins.width > 1 ? fmt::format(", {} observations per bin", pic.bins.width) : std::string{});
}

}  // namespace shard_plan
