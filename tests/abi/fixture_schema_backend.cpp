// fixture_schema_backend.cpp — a test fixture on the SDK's backend kit: the backend "schema_demo",
// which declares options of every type and publishes capabilities with fp32 and bf16, so that
// the kit's ABI 1.2 extensions (DLHOST_EXT_OPTION_SCHEMA, DLHOST_EXT_BACKEND_CAPS), the host's
// option check and its precision gate can be tested. It compiles nothing (UNIMPLEMENTED).
#include <dlhost/backend_kit.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace sdk = dlhost::sdk;

struct Context {
  std::string precision;
};

class SchemaBackend final : public sdk::Backend<Context> {
 public:
  sdk::Device device(int32_t) const override { return sdk::cpu_device("generic"); }
  std::string library() const override { return "none"; }
  std::optional<std::vector<sdk::OptionSpec>> options() const override {
    return std::vector<sdk::OptionSpec>{
        {"tile", DLHOST_OPTION_INT, "8", "rows per tile"},
        {"mode", DLHOST_OPTION_ENUM, "exact", "how to round", "exact|fast"},
        {"trace", DLHOST_OPTION_BOOL, nullptr, "log every call"},
        {"ratio", DLHOST_OPTION_FLOAT, "0.5", "a fraction"},
        {"lanes", DLHOST_OPTION_INT, "4", "vector lanes", "1..64"}};
  }
  std::optional<sdk::Capabilities> capabilities() const override {
    sdk::Capabilities caps = sdk::fp32_capabilities(DLHOST_OP_MSE_LOSS);
    caps.precisions |= sdk::bit(DLHOST_PRECISION_BF16);
    return caps;
  }
  std::unique_ptr<Context> open(int32_t, const sdk::Options& options) override {
    auto c = std::make_unique<Context>();
    c->precision = options.get("precision").value_or("");
    return c;
  }
  std::unique_ptr<sdk::Model> compile(Context&, const dlhost_graph&, const dlhost_optimizer_desc&,
                                      const sdk::Options&) override {
    sdk::unimplemented("schema_demo compiles nothing");
  }
};

}  // namespace

extern "C" DLHOST_EXPORT const dlhost_plugin* dlhost_plugin_entry(const dlhost_host_api* host) {
  return sdk::backend_plugin<SchemaBackend>(host, {"schema_demo", "0", "test fixture: options"});
}
