// Hugging Face transformers' SigLIP vision tower, the model timm names vit_*_siglip_*:
// SiglipVisionModel (model_type siglip_vision_model), the vision half of SiglipModel (model_type
// siglip; its text tower, logit_scale and logit_bias are left out with a note) and
// SiglipForImageClassification (a classifier on the mean of the normed tokens). No class token;
// the position embedding an nn.Embedding [N, D]; the blocks' q_proj, k_proj, v_proj stack into
// one qkv; post_layernorm is timm's `norm`; the head (SiglipMultiheadAttentionPoolingHead: a
// probe through nn.MultiheadAttention, then x + mlp(layernorm(x))) is timm's attention pool,
// its in_proj split into q (the first D rows) and kv (the other 2D: k, then v).
#include <memory>

#include "core/check.h"
#include "formats.h"

namespace vit::detail {

using json = nlohmann::json;

Mapping hf_siglip_mapping(const SafeTensors& st) {
  Mapping m;
  ViTConfig& c = m.cfg;
  const std::string& where = st.path();
  const std::string p = "vision_model.";
  naming_file(where, [&] {
    const std::optional<json> config = json_beside(st, "config.json");
    VIT_CHECK(config, "a Hugging Face SigLIP needs its config.json beside the weights");
    const std::string type = config->value("model_type", "");
    VIT_CHECK(type == "siglip" || type == "siglip_vision_model", "model_type '", type,
              "' with SigLIP's tensor names (vision_model.embeddings.patch_embedding): vitcpp reads "
              "model_type 'siglip' and 'siglip_vision_model'");
    // SiglipModel and SiglipForImageClassification keep the tower's settings in vision_config.
    // (A const json's operator[] on a missing key is undefined: field() looks first.)
    const json* vision = type == "siglip" ? field(*config, "vision_config") : &*config;
    VIT_CHECK(vision && vision->is_object(), "config.json has no vision_config object");
    const json& j = *vision;
    hf_read_sizes(j, c, 1e-6f);
    m.pos_resample = "hf";  // SiglipVisionEmbeddings' current interpolate_pos_encoding, whatever the release
    c.act_layer = hf_activation(j.value("hidden_act", "gelu_pytorch_tanh"));
    c.class_token = false;
    c.qkv_bias = true;
    c.pos_embed = "learn";
    c.fc_norm = false;
    const TensorInfo* cls = st.find("classifier.weight");
    c.num_classes = cls && cls->shape.size() == 2 ? cls->shape[0] : 0;
    const bool has_head = st.find(p + "head.probe") != nullptr;
    // SiglipForImageClassification averages the normed tokens (its vision head goes unused);
    // the vision model's pooled output is its head, the attention pool.
    c.global_pool = c.num_classes > 0 || !has_head ? "avg" : "map";
    if (c.num_classes == 0 && !has_head)
      m.notes.push_back(
          "no vision head (vision_use_head false): the features are the mean of the normed "
          "tokens, which transformers does not pool");
    hf_preprocessing(st, c, m, "SiglipImageProcessor");
    m.class_names = hf_class_names(*config, c.num_classes);
  });

  const std::string emb = p + "embeddings.";
  m.sources["patch_embed.proj.weight"] = {emb + "patch_embedding.weight"};
  m.sources["patch_embed.proj.bias"] = {emb + "patch_embedding.bias"};
  m.sources["pos_embed"] = {emb + "position_embedding.weight"};  // [N, D] for [1, N, D]
  hf_block_sources(m, c.depth, p + "encoder.layers.",
                   {"layer_norm1.", "self_attn.q_proj.", "self_attn.k_proj.", "self_attn.v_proj.",
                    "self_attn.out_proj.", "layer_norm2.", "mlp.fc1.", "mlp.fc2."});
  const std::string head = p + "head.";
  for (const std::string wb : {"weight", "bias"}) {
    m.sources["norm." + wb] = {p + "post_layernorm." + wb};
    m.sources["head." + wb] = {"classifier." + wb};
    m.sources["attn_pool.proj." + wb] = {head + "attention.out_proj." + wb};
    m.sources["attn_pool.norm." + wb] = {head + "layernorm." + wb};
    m.sources["attn_pool.mlp.fc1." + wb] = {head + "mlp.fc1." + wb};
    m.sources["attn_pool.mlp.fc2." + wb] = {head + "mlp.fc2." + wb};
    // nn.MultiheadAttention's in_proj: rows [0, D) make q, [D, 3D) kv (k, then v, as timm's).
    const std::string in = head + "attention.in_proj_" + wb;
    m.sources["attn_pool.q." + wb] = m.sources["attn_pool.kv." + wb] = {in};
    const int64_t D = c.embed_dim, row = wb == "weight" ? D : 1;
    // Rows [lo, hi) of in_proj into dst, the tensor checked and converted once for both fills.
    auto rows = [&st, in, D, row, whole = std::make_shared<std::vector<float>>()](int64_t lo, int64_t hi,
                                                                                  float* dst) {
      if (whole->empty()) {
        const TensorInfo* t = st.find(in);
        const Shape want = row == 1 ? Shape{3 * D} : Shape{3 * D, D};
        VIT_CHECK(t && t->shape == want, in, " has shape ", t ? shape_str(t->shape) : std::string("(none)"),
                  ", expected ", shape_str(want));
        *whole = st.to_float(in);
      }
      std::copy(whole->begin() + lo * row, whole->begin() + hi * row, dst);
    };
    m.fills["attn_pool.q." + wb] = [rows, D](float* dst) { rows(0, D, dst); };
    m.fills["attn_pool.kv." + wb] = [rows, D](float* dst) { rows(D, 3 * D, dst); };
  }
  m.sources["attn_pool.latent"] = {head + "probe"};
  // What a classifier or SiglipModel's file holds beside the tower, left out on purpose.
  std::vector<std::string> text;
  for (const auto& t : st.tensors()) {
    if (t.name.rfind(head, 0) == 0 && c.global_pool != "map") {
      m.skipped.insert(t.name);
    } else if (t.name.rfind("text_model.", 0) == 0 || t.name == "logit_scale" || t.name == "logit_bias") {
      m.skipped.insert(t.name);
      text.push_back(t.name);
    }
  }
  if (c.num_classes > 0 && st.find(head + "probe"))
    m.notes.push_back("SiglipForImageClassification pools the mean of the tokens: its vision head (" + head +
                      "*) is not used: skipped");
  if (!text.empty())
    m.notes.push_back("SiglipModel's text tower, logit_scale and logit_bias (" + std::to_string(text.size()) +
                      " tensors) are not part of the image model: skipped");
  return m;
}

}  // namespace vit::detail
