#include "frank/model/exl3_linear_loader.h"

#include <fmt/format.h>

#include "frank/core/error.h"
#include "frank/cpu/quant/exl3_codebook.h"
#include "frank/cpu/quant/exl3_matrix.h"
#include "frank/cpu/quantized_linear.h"

namespace frank::model {
namespace {

std::string stem_of(const std::string& weight_name) {
  const std::string suffix = ".weight";
  if (weight_name.size() > suffix.size() && weight_name.ends_with(suffix))
    return weight_name.substr(0, weight_name.size() - suffix.size());
  return weight_name;
}

Exl3Codebook marker_codebook(const Checkpoint& ck, const std::string& stem, std::set<std::string>& used) {
  const bool mcg = ck.has(stem + ".mcg"), mul1 = ck.has(stem + ".mul1");
  if (mcg && mul1)
    throw Error(fmt::format("EXL3 tensor '{}.trellis' has both codebook markers '.mcg' and '.mul1'", stem));
  if (!mcg && !mul1) return Exl3Codebook::ThreeInst;
  const std::string marker = stem + (mcg ? ".mcg" : ".mul1");
  if (!ck.find(marker)->shape.empty() && ck.find(marker)->numel() != 1)
    throw Error(fmt::format("EXL3 codebook marker '{}' has shape {}: expected a scalar", marker,
                            shape_string(ck.find(marker)->shape)));
  used.insert(marker);
  return mcg ? Exl3Codebook::Mcg : Exl3Codebook::Mul1;
}

void check_against_pack(const Exl3Pack& pack, const std::string& stem, const std::string& trellis, int bits,
                        Exl3Codebook codebook) {
  if (pack.mixed && stem.find(".ffn.experts.") == std::string::npos)
    throw Error(fmt::format("EXL3 tensor '{}': this mixed pack (non_routed_quantization) declares only routed experts "
                            "as EXL3",
                            trellis));
  if (pack.codebook && !pack.tensor_storage.contains(stem) && *pack.codebook != codebook)
    throw Error(fmt::format("EXL3 tensor '{}' uses the {} codebook but quantization_config says {}", trellis,
                            cpu::exl3_codebook_name(codebook), cpu::exl3_codebook_name(*pack.codebook)));
  const auto it = pack.tensor_storage.find(stem);
  if (it == pack.tensor_storage.end()) return;
  if (it->second.bits != bits)
    throw Error(fmt::format("EXL3 tensor '{}' holds {} bits per weight but quantization_config.json says {}", trellis,
                            bits, it->second.bits));
  if (it->second.codebook && *it->second.codebook != codebook)
    throw Error(fmt::format("EXL3 tensor '{}' uses the {} codebook but quantization_config.json says {}", trellis,
                            cpu::exl3_codebook_name(codebook), cpu::exl3_codebook_name(*it->second.codebook)));
}

// Sign/scale vectors must be finite: a NaN or infinity would poison every output it touches.
void check_finite(const std::vector<uint16_t>& halves, const std::string& name) {
  for (size_t i = 0; i < halves.size(); ++i)
    if ((halves[i] & 0x7C00u) == 0x7C00u)
      throw Error(fmt::format("EXL3 tensor '{}' element {} is not finite (fp16 bits 0x{:04X})", name, i, halves[i]));
}

}  // namespace

std::optional<std::string> exl3_trellis_name(const Checkpoint& ck, const std::string& weight_name) {
  const std::string name = stem_of(weight_name) + ".trellis";
  if (ck.has(name)) return name;
  return std::nullopt;
}

void load_exl3_linear(const Checkpoint& ck, const std::string& weight_name, const std::vector<int64_t>& shape,
                      const Exl3Pack& pack, LinearWeight& dst, std::set<std::string>& used) {
  const std::string stem = stem_of(weight_name), trellis = stem + ".trellis";
  const int64_t out = shape.at(0), in = shape.at(1);
  for (const char* unsupported : {".su", ".sv", ".bias"})
    if (ck.has(stem + unsupported))
      throw Error(fmt::format("EXL3 tensor '{}{}': {}", stem, unsupported,
                              std::string(unsupported) == ".bias"
                                  ? "biases on EXL3 Linears are not supported (DeepSeek's Linears have none)"
                                  : "the legacy packed-sign EXL3 format (.su / .sv) is not supported"));
  for (const char* needed : {".suh", ".svh"})
    if (!ck.has(stem + needed))
      throw Error(fmt::format("EXL3 tensor '{}' has no '{}{}' beside it", trellis, stem, needed));

  const std::vector<int64_t>& trellis_shape = ck.find(trellis)->shape;
  const int bits = cpu::exl3_bits_from_shape(trellis, trellis_shape);
  const int64_t padded_in = cpu::exl3_padded(in), padded_out = cpu::exl3_padded(out);
  if (trellis_shape[0] * 16 != padded_in || trellis_shape[1] * 16 != padded_out)
    throw Error(fmt::format("EXL3 tensor '{}' has shape {}: the Linear is [{}, {}] (out, in), so its trellis must be "
                            "[{}, {}, {}] ((in, out) padded to multiples of 128, 16x16 tiles)",
                            trellis, shape_string(trellis_shape), out, in, padded_in / 16, padded_out / 16, 16 * bits));
  const Exl3Codebook codebook = marker_codebook(ck, stem, used);
  check_against_pack(pack, stem, trellis, bits, codebook);

  QuantizedMatrix q;
  q.format = QuantizedMatrix::Format::Exl3;
  q.rows = out;
  q.cols = in;
  q.bits = bits;
  q.codebook = codebook;
  q.trellis = ck.read_u16(trellis, trellis_shape, {DType::I16, DType::U16});
  q.suh = ck.read_u16(stem + ".suh", {padded_in}, {DType::F16});
  q.svh = ck.read_u16(stem + ".svh", {padded_out}, {DType::F16});
  check_finite(q.suh, stem + ".suh");
  check_finite(q.svh, stem + ".svh");
  cpu::check_quantized_matrix(q);
  dst.dense = Tensor();
  dst.quantized = std::move(q);
  used.insert(trellis);
  used.insert(stem + ".suh");
  used.insert(stem + ".svh");
}

}  // namespace frank::model
