// test_abi.cpp — the v1 ABI freeze: struct layouts, table offsets, enum values and the dropout
// mask as released, and the ABI version agreeing with sdk/CHANGELOG.md. (The plugin loader's
// refusals are tested in test_plugin_loading.cpp.)
//
// The layout numbers below were taken from each ABI minor version when it was released (1.0,
// then 1.1 for what 1.1 appended). If one of these fails, a change broke the ABI: append new
// fields at the end of a struct instead (and update its STRUCT_SIZE macro, DLHOST_ABI_MINOR and
// sdk/CHANGELOG.md), never reorder, remove or retype. Sizes are lower bounds: structs only grow.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <regex>
#include <string>

#include "core/host_api.h"
#include "core/plugin_registry.h"
#include "dlhost/dlhost.h"
#include "dlhost/dlhost.hpp"

namespace {

constexpr size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// A struct_size macro that still names an old last field after a field was appended would let a
// new writer claim an old size: each macro must cover the whole struct but its tail padding.
static_assert(align_up(DLHOST_BUFFER_STRUCT_SIZE, alignof(dlhost_buffer)) == sizeof(dlhost_buffer),
              "DLHOST_BUFFER_STRUCT_SIZE does not name the last field of dlhost_buffer");
static_assert(align_up(DLHOST_EXTENSION_STRUCT_SIZE, alignof(dlhost_extension)) ==
                  sizeof(dlhost_extension),
              "DLHOST_EXTENSION_STRUCT_SIZE does not name the last field of dlhost_extension");
static_assert(align_up(DLHOST_HOST_API_STRUCT_SIZE, alignof(dlhost_host_api)) ==
                  sizeof(dlhost_host_api),
              "DLHOST_HOST_API_STRUCT_SIZE does not name the last field of dlhost_host_api");
static_assert(align_up(DLHOST_PLUGIN_STRUCT_SIZE, alignof(dlhost_plugin)) == sizeof(dlhost_plugin),
              "DLHOST_PLUGIN_STRUCT_SIZE does not name the last field of dlhost_plugin");
static_assert(align_up(DLHOST_FC_ATTRS_STRUCT_SIZE, alignof(dlhost_fc_attrs)) ==
                  sizeof(dlhost_fc_attrs),
              "DLHOST_FC_ATTRS_STRUCT_SIZE does not name the last field of dlhost_fc_attrs");
static_assert(
    align_up(DLHOST_CONV2D_ATTRS_STRUCT_SIZE, alignof(dlhost_conv2d_attrs)) ==
        sizeof(dlhost_conv2d_attrs),
    "DLHOST_CONV2D_ATTRS_STRUCT_SIZE does not name the last field of dlhost_conv2d_attrs");
static_assert(
    align_up(DLHOST_POOL2D_ATTRS_STRUCT_SIZE, alignof(dlhost_pool2d_attrs)) ==
        sizeof(dlhost_pool2d_attrs),
    "DLHOST_POOL2D_ATTRS_STRUCT_SIZE does not name the last field of dlhost_pool2d_attrs");
static_assert(
    align_up(DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE, alignof(dlhost_activation_attrs)) ==
        sizeof(dlhost_activation_attrs),
    "DLHOST_ACTIVATION_ATTRS_STRUCT_SIZE does not name the last field of dlhost_activation_attrs");
static_assert(align_up(DLHOST_TENSOR_DESC_STRUCT_SIZE, alignof(dlhost_tensor_desc)) ==
                  sizeof(dlhost_tensor_desc),
              "DLHOST_TENSOR_DESC_STRUCT_SIZE does not name the last field of dlhost_tensor_desc");
static_assert(align_up(DLHOST_PARAM_DESC_STRUCT_SIZE, alignof(dlhost_param_desc)) ==
                  sizeof(dlhost_param_desc),
              "DLHOST_PARAM_DESC_STRUCT_SIZE does not name the last field of dlhost_param_desc");
static_assert(align_up(DLHOST_NODE_STRUCT_SIZE, alignof(dlhost_node)) == sizeof(dlhost_node),
              "DLHOST_NODE_STRUCT_SIZE does not name the last field of dlhost_node");
static_assert(align_up(DLHOST_GRAPH_STRUCT_SIZE, alignof(dlhost_graph)) == sizeof(dlhost_graph),
              "DLHOST_GRAPH_STRUCT_SIZE does not name the last field of dlhost_graph");
static_assert(align_up(DLHOST_BUILDER_API_STRUCT_SIZE, alignof(dlhost_builder_api)) ==
                  sizeof(dlhost_builder_api),
              "DLHOST_BUILDER_API_STRUCT_SIZE does not name the last field of dlhost_builder_api");
static_assert(align_up(DLHOST_DEVICE_INFO_STRUCT_SIZE, alignof(dlhost_device_info)) ==
                  sizeof(dlhost_device_info),
              "DLHOST_DEVICE_INFO_STRUCT_SIZE does not name the last field of dlhost_device_info");
static_assert(
    align_up(DLHOST_OPTIMIZER_DESC_STRUCT_SIZE, alignof(dlhost_optimizer_desc)) ==
        sizeof(dlhost_optimizer_desc),
    "DLHOST_OPTIMIZER_DESC_STRUCT_SIZE does not name the last field of dlhost_optimizer_desc");
static_assert(align_up(DLHOST_GRAD_READY_STRUCT_SIZE, alignof(dlhost_grad_ready)) ==
                  sizeof(dlhost_grad_ready),
              "DLHOST_GRAD_READY_STRUCT_SIZE does not name the last field of dlhost_grad_ready");
static_assert(align_up(DLHOST_MODEL_INFO_STRUCT_SIZE, alignof(dlhost_model_info)) ==
                  sizeof(dlhost_model_info),
              "DLHOST_MODEL_INFO_STRUCT_SIZE does not name the last field of dlhost_model_info");
static_assert(align_up(DLHOST_TOOL_RUNTIME_ARGS_STRUCT_SIZE, alignof(dlhost_tool_runtime_args)) ==
                  sizeof(dlhost_tool_runtime_args),
              "DLHOST_TOOL_RUNTIME_ARGS_STRUCT_SIZE does not name its last field");
static_assert(align_up(DLHOST_TOOL_RUNTIME_INFO_STRUCT_SIZE, alignof(dlhost_tool_runtime_info)) ==
                  sizeof(dlhost_tool_runtime_info),
              "DLHOST_TOOL_RUNTIME_INFO_STRUCT_SIZE does not name its last field");
static_assert(align_up(DLHOST_TOOL_RUNTIME_EXT_STRUCT_SIZE, alignof(dlhost_tool_runtime_ext)) ==
                  sizeof(dlhost_tool_runtime_ext),
              "DLHOST_TOOL_RUNTIME_EXT_STRUCT_SIZE does not name its last field");
static_assert(align_up(DLHOST_OWNED_STEPS_STRUCT_SIZE, alignof(dlhost_owned_steps)) ==
                  sizeof(dlhost_owned_steps),
              "DLHOST_OWNED_STEPS_STRUCT_SIZE does not name its last field");
static_assert(align_up(DLHOST_OWNED_STEPS_INFO_STRUCT_SIZE, alignof(dlhost_owned_steps_info)) ==
                  sizeof(dlhost_owned_steps_info),
              "DLHOST_OWNED_STEPS_INFO_STRUCT_SIZE does not name its last field");
static_assert(align_up(DLHOST_STEP_LOOP_EXT_STRUCT_SIZE, alignof(dlhost_step_loop_ext)) ==
                  sizeof(dlhost_step_loop_ext),
              "DLHOST_STEP_LOOP_EXT_STRUCT_SIZE does not name its last field");
static_assert(align_up(DLHOST_BACKEND_API_STRUCT_SIZE, alignof(dlhost_backend_api)) ==
                  sizeof(dlhost_backend_api),
              "DLHOST_BACKEND_API_STRUCT_SIZE does not name the last field of dlhost_backend_api");
static_assert(
    align_up(DLHOST_COMM_INIT_ARGS_STRUCT_SIZE, alignof(dlhost_comm_init_args)) ==
        sizeof(dlhost_comm_init_args),
    "DLHOST_COMM_INIT_ARGS_STRUCT_SIZE does not name the last field of dlhost_comm_init_args");
static_assert(align_up(DLHOST_COMM_CAPS_STRUCT_SIZE, alignof(dlhost_comm_caps)) ==
                  sizeof(dlhost_comm_caps),
              "DLHOST_COMM_CAPS_STRUCT_SIZE does not name the last field of dlhost_comm_caps");
static_assert(align_up(DLHOST_COMM_API_STRUCT_SIZE, alignof(dlhost_comm_api)) ==
                  sizeof(dlhost_comm_api),
              "DLHOST_COMM_API_STRUCT_SIZE does not name the last field of dlhost_comm_api");
static_assert(
    align_up(DLHOST_NETWORK_INFO_STRUCT_SIZE, alignof(dlhost_network_info)) ==
        sizeof(dlhost_network_info),
    "DLHOST_NETWORK_INFO_STRUCT_SIZE does not name the last field of dlhost_network_info");
static_assert(align_up(DLHOST_NETWORK_API_STRUCT_SIZE, alignof(dlhost_network_api)) ==
                  sizeof(dlhost_network_api),
              "DLHOST_NETWORK_API_STRUCT_SIZE does not name the last field of dlhost_network_api");

static_assert(
    align_up(DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE, alignof(dlhost_batch_norm_attrs)) ==
        sizeof(dlhost_batch_norm_attrs),
    "DLHOST_BATCH_NORM_ATTRS_STRUCT_SIZE does not name the last field of dlhost_batch_norm_attrs");
static_assert(
    align_up(DLHOST_DROPOUT_ATTRS_STRUCT_SIZE, alignof(dlhost_dropout_attrs)) ==
        sizeof(dlhost_dropout_attrs),
    "DLHOST_DROPOUT_ATTRS_STRUCT_SIZE does not name the last field of dlhost_dropout_attrs");
static_assert(align_up(DLHOST_LRN_ATTRS_STRUCT_SIZE, alignof(dlhost_lrn_attrs)) ==
                  sizeof(dlhost_lrn_attrs),
              "DLHOST_LRN_ATTRS_STRUCT_SIZE does not name the last field of dlhost_lrn_attrs");
static_assert(
    align_up(DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE, alignof(dlhost_embedding_attrs)) ==
        sizeof(dlhost_embedding_attrs),
    "DLHOST_EMBEDDING_ATTRS_STRUCT_SIZE does not name the last field of dlhost_embedding_attrs");
static_assert(align_up(DLHOST_LSTM_ATTRS_STRUCT_SIZE, alignof(dlhost_lstm_attrs)) ==
                  sizeof(dlhost_lstm_attrs),
              "DLHOST_LSTM_ATTRS_STRUCT_SIZE does not name the last field of dlhost_lstm_attrs");

#define DLHOST_ASSERT_STRUCT_SIZE_NAMES_LAST(type, SIZE)             \
  static_assert(align_up(SIZE, alignof(type)) == sizeof(type), #SIZE \
                " does not name the last "                           \
                "field of " #type)
DLHOST_ASSERT_STRUCT_SIZE_NAMES_LAST(dlhost_layer_norm_attrs, DLHOST_LAYER_NORM_ATTRS_STRUCT_SIZE);
DLHOST_ASSERT_STRUCT_SIZE_NAMES_LAST(dlhost_gelu_attrs, DLHOST_GELU_ATTRS_STRUCT_SIZE);
DLHOST_ASSERT_STRUCT_SIZE_NAMES_LAST(dlhost_attention_attrs, DLHOST_ATTENTION_ATTRS_STRUCT_SIZE);
DLHOST_ASSERT_STRUCT_SIZE_NAMES_LAST(dlhost_position_embedding_attrs,
                                     DLHOST_POSITION_EMBEDDING_ATTRS_STRUCT_SIZE);
DLHOST_ASSERT_STRUCT_SIZE_NAMES_LAST(dlhost_tied_fc_attrs, DLHOST_TIED_FC_ATTRS_STRUCT_SIZE);
DLHOST_ASSERT_STRUCT_SIZE_NAMES_LAST(dlhost_backend_caps, DLHOST_BACKEND_CAPS_STRUCT_SIZE);

TEST(AbiFreeze, VersionIsOneDotSomething) { EXPECT_EQ(DLHOST_ABI_MAJOR, 1); }

// Every minor gets a CHANGELOG entry (ABI.md rule 5): the newest "## MAJOR.MINOR" heading of
// sdk/CHANGELOG.md is the version the header declares, so raising DLHOST_ABI_MINOR without
// saying what it added, or writing an entry for a version not declared, fails here.
TEST(AbiFreeze, VersionMatchesTheNewestChangelogEntry) {
  const std::string path = std::string(DLHOST_TEST_SOURCE_DIR) + "/sdk/CHANGELOG.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  const std::regex heading(R"(^## ([0-9]+)\.([0-9]+)\s*$)");
  std::string line;
  std::smatch m;
  while (std::getline(in, line) && !std::regex_match(line, m, heading)) {
  }
  ASSERT_FALSE(m.empty()) << path << " has no '## MAJOR.MINOR' heading";
  EXPECT_EQ(std::stoi(m[1]), DLHOST_ABI_MAJOR) << path << ": newest entry " << line;
  EXPECT_EQ(std::stoi(m[2]), DLHOST_ABI_MINOR) << path << ": newest entry " << line;
}

TEST(AbiFreeze, StructLayoutsOfV1) {
  EXPECT_GE(sizeof(dlhost_buffer), 40u);
  EXPECT_EQ(offsetof(dlhost_buffer, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_buffer, data), 8u);
  EXPECT_EQ(offsetof(dlhost_buffer, bytes), 16u);
  EXPECT_EQ(offsetof(dlhost_buffer, dtype), 24u);
  EXPECT_EQ(offsetof(dlhost_buffer, memory_space), 28u);
  EXPECT_EQ(offsetof(dlhost_buffer, device), 32u);
  EXPECT_GE(sizeof(dlhost_extension), 24u);
  EXPECT_EQ(offsetof(dlhost_extension, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_extension, type), 8u);
  EXPECT_EQ(offsetof(dlhost_extension, next), 16u);
  EXPECT_GE(sizeof(dlhost_host_api), 88u);
  EXPECT_EQ(offsetof(dlhost_host_api, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_host_api, abi_major), 8u);
  EXPECT_EQ(offsetof(dlhost_host_api, abi_minor), 12u);
  EXPECT_EQ(offsetof(dlhost_host_api, status_create), 16u);
  EXPECT_EQ(offsetof(dlhost_host_api, status_code), 24u);
  EXPECT_EQ(offsetof(dlhost_host_api, status_message), 32u);
  EXPECT_EQ(offsetof(dlhost_host_api, status_destroy), 40u);
  EXPECT_EQ(offsetof(dlhost_host_api, log), 48u);
  EXPECT_EQ(offsetof(dlhost_host_api, log_enabled), 56u);
  EXPECT_EQ(offsetof(dlhost_host_api, option_get), 64u);
  EXPECT_EQ(offsetof(dlhost_host_api, store_set), 72u);
  EXPECT_EQ(offsetof(dlhost_host_api, store_get), 80u);
  EXPECT_GE(sizeof(dlhost_plugin), 88u);
  EXPECT_EQ(offsetof(dlhost_plugin, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_plugin, abi_major), 8u);
  EXPECT_EQ(offsetof(dlhost_plugin, abi_minor), 12u);
  EXPECT_EQ(offsetof(dlhost_plugin, kind), 16u);
  EXPECT_EQ(offsetof(dlhost_plugin, name), 24u);
  EXPECT_EQ(offsetof(dlhost_plugin, version), 32u);
  EXPECT_EQ(offsetof(dlhost_plugin, description), 40u);
  EXPECT_EQ(offsetof(dlhost_plugin, query), 48u);
  EXPECT_EQ(offsetof(dlhost_plugin, backend), 56u);
  EXPECT_EQ(offsetof(dlhost_plugin, comm), 64u);
  EXPECT_EQ(offsetof(dlhost_plugin, network), 72u);
  EXPECT_EQ(offsetof(dlhost_plugin, extensions), 80u);
  EXPECT_GE(sizeof(dlhost_fc_attrs), 24u);
  EXPECT_EQ(offsetof(dlhost_fc_attrs, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_fc_attrs, out_features), 8u);
  EXPECT_EQ(offsetof(dlhost_fc_attrs, has_bias), 16u);
  EXPECT_GE(sizeof(dlhost_conv2d_attrs), 96u);
  EXPECT_EQ(offsetof(dlhost_conv2d_attrs, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_conv2d_attrs, out_channels), 8u);
  EXPECT_EQ(offsetof(dlhost_conv2d_attrs, kernel_h), 16u);
  EXPECT_EQ(offsetof(dlhost_conv2d_attrs, kernel_w), 24u);
  EXPECT_EQ(offsetof(dlhost_conv2d_attrs, stride_h), 32u);
  EXPECT_EQ(offsetof(dlhost_conv2d_attrs, stride_w), 40u);
  EXPECT_EQ(offsetof(dlhost_conv2d_attrs, pad_h), 48u);
  EXPECT_EQ(offsetof(dlhost_conv2d_attrs, pad_w), 56u);
  EXPECT_EQ(offsetof(dlhost_conv2d_attrs, dilation_h), 64u);
  EXPECT_EQ(offsetof(dlhost_conv2d_attrs, dilation_w), 72u);
  EXPECT_EQ(offsetof(dlhost_conv2d_attrs, groups), 80u);
  EXPECT_EQ(offsetof(dlhost_conv2d_attrs, has_bias), 88u);
  EXPECT_GE(sizeof(dlhost_pool2d_attrs), 72u);
  EXPECT_EQ(offsetof(dlhost_pool2d_attrs, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_pool2d_attrs, kind), 8u);
  EXPECT_EQ(offsetof(dlhost_pool2d_attrs, kernel_h), 16u);
  EXPECT_EQ(offsetof(dlhost_pool2d_attrs, kernel_w), 24u);
  EXPECT_EQ(offsetof(dlhost_pool2d_attrs, stride_h), 32u);
  EXPECT_EQ(offsetof(dlhost_pool2d_attrs, stride_w), 40u);
  EXPECT_EQ(offsetof(dlhost_pool2d_attrs, pad_h), 48u);
  EXPECT_EQ(offsetof(dlhost_pool2d_attrs, pad_w), 56u);
  EXPECT_EQ(offsetof(dlhost_pool2d_attrs, ceil_mode), 64u);
  EXPECT_EQ(offsetof(dlhost_pool2d_attrs, count_include_pad), 68u);
  EXPECT_GE(sizeof(dlhost_activation_attrs), 16u);
  EXPECT_EQ(offsetof(dlhost_activation_attrs, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_activation_attrs, kind), 8u);
  EXPECT_GE(sizeof(dlhost_tensor_desc), 104u);
  EXPECT_EQ(offsetof(dlhost_tensor_desc, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_tensor_desc, id), 8u);
  EXPECT_EQ(offsetof(dlhost_tensor_desc, dtype), 12u);
  EXPECT_EQ(offsetof(dlhost_tensor_desc, rank), 16u);
  EXPECT_EQ(offsetof(dlhost_tensor_desc, dims), 24u);
  EXPECT_EQ(offsetof(dlhost_tensor_desc, name), 88u);
  EXPECT_EQ(offsetof(dlhost_tensor_desc, producer), 96u);
  EXPECT_GE(sizeof(dlhost_param_desc), 128u);
  EXPECT_EQ(offsetof(dlhost_param_desc, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_param_desc, id), 8u);
  EXPECT_EQ(offsetof(dlhost_param_desc, node), 12u);
  EXPECT_EQ(offsetof(dlhost_param_desc, role), 16u);
  EXPECT_EQ(offsetof(dlhost_param_desc, init), 20u);
  EXPECT_EQ(offsetof(dlhost_param_desc, rank), 24u);
  EXPECT_EQ(offsetof(dlhost_param_desc, dims), 32u);
  EXPECT_EQ(offsetof(dlhost_param_desc, count), 96u);
  EXPECT_EQ(offsetof(dlhost_param_desc, fan_in), 104u);
  EXPECT_EQ(offsetof(dlhost_param_desc, fan_out), 112u);
  EXPECT_EQ(offsetof(dlhost_param_desc, name), 120u);
  EXPECT_GE(sizeof(dlhost_node), 72u);
  EXPECT_EQ(offsetof(dlhost_node, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_node, op), 8u);
  EXPECT_EQ(offsetof(dlhost_node, name), 16u);
  EXPECT_EQ(offsetof(dlhost_node, num_inputs), 24u);
  EXPECT_EQ(offsetof(dlhost_node, inputs), 32u);
  EXPECT_EQ(offsetof(dlhost_node, output), 40u);
  EXPECT_EQ(offsetof(dlhost_node, num_params), 44u);
  EXPECT_EQ(offsetof(dlhost_node, params), 48u);
  EXPECT_EQ(offsetof(dlhost_node, attrs), 56u);
  EXPECT_EQ(offsetof(dlhost_node, forward_flops), 64u);
  EXPECT_GE(sizeof(dlhost_graph), 96u);
  EXPECT_EQ(offsetof(dlhost_graph, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_graph, network), 8u);
  EXPECT_EQ(offsetof(dlhost_graph, batch), 16u);
  EXPECT_EQ(offsetof(dlhost_graph, num_tensors), 24u);
  EXPECT_EQ(offsetof(dlhost_graph, tensors), 32u);
  EXPECT_EQ(offsetof(dlhost_graph, num_nodes), 40u);
  EXPECT_EQ(offsetof(dlhost_graph, nodes), 48u);
  EXPECT_EQ(offsetof(dlhost_graph, num_params), 56u);
  EXPECT_EQ(offsetof(dlhost_graph, params), 64u);
  EXPECT_EQ(offsetof(dlhost_graph, num_inputs), 72u);
  EXPECT_EQ(offsetof(dlhost_graph, inputs), 80u);
  EXPECT_EQ(offsetof(dlhost_graph, loss), 88u);
  EXPECT_GE(sizeof(dlhost_builder_api), 64u);
  EXPECT_EQ(offsetof(dlhost_builder_api, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_builder_api, input), 8u);
  EXPECT_EQ(offsetof(dlhost_builder_api, fc), 16u);
  EXPECT_EQ(offsetof(dlhost_builder_api, conv2d), 24u);
  EXPECT_EQ(offsetof(dlhost_builder_api, pool2d), 32u);
  EXPECT_EQ(offsetof(dlhost_builder_api, activation), 40u);
  EXPECT_EQ(offsetof(dlhost_builder_api, softmax_cross_entropy), 48u);
  EXPECT_EQ(offsetof(dlhost_builder_api, mse_loss), 56u);
  EXPECT_GE(sizeof(dlhost_device_info), 64u);
  EXPECT_EQ(offsetof(dlhost_device_info, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_device_info, index), 8u);
  EXPECT_EQ(offsetof(dlhost_device_info, kind), 12u);
  EXPECT_EQ(offsetof(dlhost_device_info, name), 16u);
  EXPECT_EQ(offsetof(dlhost_device_info, model), 24u);
  EXPECT_EQ(offsetof(dlhost_device_info, cores), 32u);
  EXPECT_EQ(offsetof(dlhost_device_info, isa), 40u);
  EXPECT_EQ(offsetof(dlhost_device_info, memory_bytes), 48u);
  EXPECT_EQ(offsetof(dlhost_device_info, library), 56u);
  EXPECT_GE(sizeof(dlhost_optimizer_desc), 32u);
  EXPECT_EQ(offsetof(dlhost_optimizer_desc, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_optimizer_desc, kind), 8u);
  EXPECT_EQ(offsetof(dlhost_optimizer_desc, learning_rate), 12u);
  EXPECT_EQ(offsetof(dlhost_optimizer_desc, momentum), 16u);
  EXPECT_EQ(offsetof(dlhost_optimizer_desc, weight_decay), 20u);
  EXPECT_EQ(offsetof(dlhost_optimizer_desc, clip_norm), 24u);
  EXPECT_GE(sizeof(dlhost_grad_ready), 24u);
  EXPECT_EQ(offsetof(dlhost_grad_ready, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_grad_ready, user), 8u);
  EXPECT_EQ(offsetof(dlhost_grad_ready, fn), 16u);
  EXPECT_GE(sizeof(dlhost_model_info), 40u);
  EXPECT_EQ(offsetof(dlhost_model_info, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_model_info, threads), 8u);
  EXPECT_EQ(offsetof(dlhost_model_info, implementation), 16u);
  EXPECT_EQ(offsetof(dlhost_model_info, param_bytes), 24u);
  EXPECT_EQ(offsetof(dlhost_model_info, workspace_bytes), 32u);
  EXPECT_GE(sizeof(dlhost_backend_api), 144u);
  EXPECT_EQ(offsetof(dlhost_backend_api, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_backend_api, device_count), 8u);
  EXPECT_EQ(offsetof(dlhost_backend_api, device_info), 16u);
  EXPECT_EQ(offsetof(dlhost_backend_api, context_create), 24u);
  EXPECT_EQ(offsetof(dlhost_backend_api, context_destroy), 32u);
  EXPECT_EQ(offsetof(dlhost_backend_api, compile), 40u);
  EXPECT_EQ(offsetof(dlhost_backend_api, model_destroy), 48u);
  EXPECT_EQ(offsetof(dlhost_backend_api, model_info), 56u);
  EXPECT_EQ(offsetof(dlhost_backend_api, set_input), 64u);
  EXPECT_EQ(offsetof(dlhost_backend_api, forward), 72u);
  EXPECT_EQ(offsetof(dlhost_backend_api, backward), 80u);
  EXPECT_EQ(offsetof(dlhost_backend_api, update), 88u);
  EXPECT_EQ(offsetof(dlhost_backend_api, synchronize), 96u);
  EXPECT_EQ(offsetof(dlhost_backend_api, read_loss), 104u);
  EXPECT_EQ(offsetof(dlhost_backend_api, param_buffers), 112u);
  EXPECT_EQ(offsetof(dlhost_backend_api, read_param), 120u);
  EXPECT_EQ(offsetof(dlhost_backend_api, write_param), 128u);
  EXPECT_EQ(offsetof(dlhost_backend_api, memory_in_use), 136u);
  EXPECT_GE(sizeof(dlhost_comm_init_args), 48u);
  EXPECT_EQ(offsetof(dlhost_comm_init_args, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_comm_init_args, rank), 8u);
  EXPECT_EQ(offsetof(dlhost_comm_init_args, world_size), 12u);
  EXPECT_EQ(offsetof(dlhost_comm_init_args, local_rank), 16u);
  EXPECT_EQ(offsetof(dlhost_comm_init_args, local_size), 20u);
  EXPECT_EQ(offsetof(dlhost_comm_init_args, device), 24u);
  EXPECT_EQ(offsetof(dlhost_comm_init_args, options), 32u);
  EXPECT_EQ(offsetof(dlhost_comm_init_args, extensions), 40u);
  EXPECT_GE(sizeof(dlhost_comm_caps), 32u);
  EXPECT_EQ(offsetof(dlhost_comm_caps, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_comm_caps, host_memory), 8u);
  EXPECT_EQ(offsetof(dlhost_comm_caps, device_memory), 12u);
  EXPECT_EQ(offsetof(dlhost_comm_caps, dtypes), 16u);
  EXPECT_EQ(offsetof(dlhost_comm_caps, library), 24u);
  EXPECT_GE(sizeof(dlhost_comm_api), 88u);
  EXPECT_EQ(offsetof(dlhost_comm_api, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_comm_api, capabilities), 8u);
  EXPECT_EQ(offsetof(dlhost_comm_api, init), 16u);
  EXPECT_EQ(offsetof(dlhost_comm_api, finalize), 24u);
  EXPECT_EQ(offsetof(dlhost_comm_api, all_reduce), 32u);
  EXPECT_EQ(offsetof(dlhost_comm_api, broadcast), 40u);
  EXPECT_EQ(offsetof(dlhost_comm_api, all_gather), 48u);
  EXPECT_EQ(offsetof(dlhost_comm_api, barrier), 56u);
  EXPECT_EQ(offsetof(dlhost_comm_api, test), 64u);
  EXPECT_EQ(offsetof(dlhost_comm_api, wait), 72u);
  EXPECT_EQ(offsetof(dlhost_comm_api, request_free), 80u);
  EXPECT_GE(sizeof(dlhost_network_info), 56u);
  EXPECT_EQ(offsetof(dlhost_network_info, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_network_info, name), 8u);
  EXPECT_EQ(offsetof(dlhost_network_info, description), 16u);
  EXPECT_EQ(offsetof(dlhost_network_info, dataset), 24u);
  EXPECT_EQ(offsetof(dlhost_network_info, cpu_batch), 32u);
  EXPECT_EQ(offsetof(dlhost_network_info, gpu_batch), 40u);
  EXPECT_EQ(offsetof(dlhost_network_info, optimizer), 48u);
  EXPECT_GE(sizeof(dlhost_network_api), 32u);
  EXPECT_EQ(offsetof(dlhost_network_api, struct_size), 0u);
  EXPECT_EQ(offsetof(dlhost_network_api, count), 8u);
  EXPECT_EQ(offsetof(dlhost_network_api, info), 16u);
  EXPECT_EQ(offsetof(dlhost_network_api, build), 24u);
}

TEST(AbiFreeze, StructLayoutsAppendedIn1_1) {
  EXPECT_EQ(offsetof(dlhost_fc_attrs, batch_dims), 20u);
  EXPECT_GE(sizeof(dlhost_batch_norm_attrs), 16u);
  EXPECT_EQ(offsetof(dlhost_batch_norm_attrs, epsilon), 8u);
  EXPECT_EQ(offsetof(dlhost_batch_norm_attrs, momentum), 12u);
  EXPECT_GE(sizeof(dlhost_dropout_attrs), 16u);
  EXPECT_EQ(offsetof(dlhost_dropout_attrs, probability), 8u);
  EXPECT_GE(sizeof(dlhost_lrn_attrs), 32u);
  EXPECT_EQ(offsetof(dlhost_lrn_attrs, size), 8u);
  EXPECT_EQ(offsetof(dlhost_lrn_attrs, alpha), 16u);
  EXPECT_EQ(offsetof(dlhost_lrn_attrs, beta), 20u);
  EXPECT_EQ(offsetof(dlhost_lrn_attrs, k), 24u);
  EXPECT_GE(sizeof(dlhost_embedding_attrs), 24u);
  EXPECT_EQ(offsetof(dlhost_embedding_attrs, vocab), 8u);
  EXPECT_EQ(offsetof(dlhost_embedding_attrs, dim), 16u);
  EXPECT_GE(sizeof(dlhost_lstm_attrs), 24u);
  EXPECT_EQ(offsetof(dlhost_lstm_attrs, hidden), 8u);
  EXPECT_EQ(offsetof(dlhost_lstm_attrs, layers), 16u);
  EXPECT_EQ(offsetof(dlhost_builder_api, batch_norm), 64u);
  EXPECT_EQ(offsetof(dlhost_builder_api, dropout), 72u);
  EXPECT_EQ(offsetof(dlhost_builder_api, add), 80u);
  EXPECT_EQ(offsetof(dlhost_builder_api, lrn), 88u);
  EXPECT_EQ(offsetof(dlhost_builder_api, embedding), 96u);
  EXPECT_EQ(offsetof(dlhost_builder_api, lstm), 104u);
  EXPECT_EQ(offsetof(dlhost_builder_api, global_avg_pool), 112u);
  // 1.0 readers of these structs stop where 1.0 ended.
  EXPECT_EQ(DLHOST_FC_ATTRS_STRUCT_SIZE_1_0, offsetof(dlhost_fc_attrs, has_bias) + 4);
  EXPECT_EQ(DLHOST_BUILDER_API_STRUCT_SIZE_1_0, offsetof(dlhost_builder_api, batch_norm));
}

// ABI 1.4: the Transformer's ops and AdamW, all appended.
TEST(AbiFreeze, StructLayoutsAppendedIn1_4) {
  EXPECT_EQ(DLHOST_OP_LAYER_NORM, 15);
  EXPECT_EQ(DLHOST_OP_GELU, 16);
  EXPECT_EQ(DLHOST_OP_ATTENTION, 17);
  EXPECT_EQ(DLHOST_OP_POSITION_EMBEDDING, 18);
  EXPECT_EQ(DLHOST_OP_TIED_FC, 19);
  EXPECT_EQ(DLHOST_OPTIMIZER_ADAMW, 2);
  EXPECT_EQ(DLHOST_GELU_TANH, 1);
  EXPECT_EQ(offsetof(dlhost_layer_norm_attrs, epsilon), 8u);
  EXPECT_EQ(offsetof(dlhost_gelu_attrs, approximation), 8u);
  EXPECT_EQ(offsetof(dlhost_attention_attrs, heads), 8u);
  EXPECT_EQ(offsetof(dlhost_attention_attrs, causal), 16u);
  EXPECT_EQ(offsetof(dlhost_attention_attrs, dropout), 20u);
  EXPECT_EQ(offsetof(dlhost_position_embedding_attrs, max_positions), 8u);
  EXPECT_EQ(offsetof(dlhost_tied_fc_attrs, embedding_node), 8u);
  EXPECT_EQ(offsetof(dlhost_tied_fc_attrs, has_bias), 12u);
  EXPECT_EQ(offsetof(dlhost_builder_api, layer_norm), 120u);
  EXPECT_EQ(offsetof(dlhost_builder_api, gelu), 128u);
  EXPECT_EQ(offsetof(dlhost_builder_api, attention), 136u);
  EXPECT_EQ(offsetof(dlhost_builder_api, position_embedding), 144u);
  EXPECT_EQ(offsetof(dlhost_builder_api, tied_fc), 152u);
  EXPECT_EQ(offsetof(dlhost_optimizer_desc, beta1), 28u);
  EXPECT_EQ(offsetof(dlhost_optimizer_desc, beta2), 32u);
  EXPECT_EQ(offsetof(dlhost_optimizer_desc, epsilon), 36u);
  EXPECT_EQ(DLHOST_OPTIMIZER_DESC_STRUCT_SIZE_1_0, 28u);
  EXPECT_EQ(offsetof(dlhost_backend_caps, optimizers),
            offsetof(dlhost_backend_caps, asynchronous) + 4);
}

// ABI 1.5: the backend says whether it fused the step (dlhost_model_info.fused_step) and where
// it is knowingly faster than its framework's users (departures).
TEST(AbiFreeze, StructLayoutsAppendedIn1_5) {
  EXPECT_EQ(offsetof(dlhost_model_info, fused_step), 40u);
  EXPECT_EQ(offsetof(dlhost_model_info, departures), 48u);
  EXPECT_EQ(DLHOST_MODEL_INFO_STRUCT_SIZE, 56u);
  EXPECT_EQ(DLHOST_MODEL_INFO_STRUCT_SIZE_1_0, 40u);
  EXPECT_EQ(sizeof(dlhost_model_info), 56u);
}

// ABI 1.5: a backend's own distributed runtime (issue 41): a new extension type and three new
// structs, frozen here as released.
TEST(AbiFreeze, ToolRuntimeExtensionIn1_5) {
  EXPECT_EQ(DLHOST_EXT_TOOL_RUNTIME, 10);
  EXPECT_EQ(DLHOST_RUNTIME_WORKER, 1);
  EXPECT_EQ(DLHOST_RUNTIME_PARAMETER_SERVER, 2);
  EXPECT_EQ(DLHOST_RUNTIME_SCHEDULER, 3);
  EXPECT_EQ(DLHOST_RUNTIME_ROLE_LIMIT, 8);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_args, runtime), 8u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_args, rank), 16u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_args, world_size), 20u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_args, role), 24u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_args, store_prefix), 32u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_args, host), 40u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_args, timeout_ms), 48u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_args, options), 56u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_args, cluster), 64u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_args, optimizer), 72u);
  EXPECT_EQ(DLHOST_TOOL_RUNTIME_ARGS_STRUCT_SIZE, 80u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_info, mode), 8u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_info, library), 16u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_info, comm_time), 24u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_info, no_comm_time), 32u);
  EXPECT_EQ(DLHOST_TOOL_RUNTIME_INFO_STRUCT_SIZE, 40u);
  // The extension header every chain entry shares, then the runtime's table.
  EXPECT_EQ(offsetof(dlhost_tool_runtime_ext, type), offsetof(dlhost_extension, type));
  EXPECT_EQ(offsetof(dlhost_tool_runtime_ext, next), offsetof(dlhost_extension, next));
  EXPECT_EQ(offsetof(dlhost_tool_runtime_ext, runtimes), 24u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_ext, runtime_query), 32u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_ext, runtime_attach), 40u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_ext, runtime_comm_times), 48u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_ext, runtime_roles), 56u);
  EXPECT_EQ(offsetof(dlhost_tool_runtime_ext, runtime_serve), 64u);
  EXPECT_EQ(DLHOST_TOOL_RUNTIME_EXT_STRUCT_SIZE, 72u);
}

// ABI 1.5: a backend whose tool owns its training loop (issue 42, BigDL): one new extension type
// and three new structs, frozen here as released.
TEST(AbiFreeze, StepLoopExtensionIn1_5) {
  EXPECT_EQ(DLHOST_EXT_STEP_LOOP, 11);
  EXPECT_EQ(offsetof(dlhost_owned_steps, warmup), 8u);
  EXPECT_EQ(offsetof(dlhost_owned_steps, iterations), 16u);
  EXPECT_EQ(offsetof(dlhost_owned_steps, feed), 24u);
  EXPECT_EQ(offsetof(dlhost_owned_steps, feed_user), 32u);
  EXPECT_EQ(offsetof(dlhost_owned_steps, step_ms), 40u);
  EXPECT_EQ(offsetof(dlhost_owned_steps, loss), 48u);
  EXPECT_EQ(offsetof(dlhost_owned_steps, compute_ms), 56u);
  EXPECT_EQ(DLHOST_OWNED_STEPS_STRUCT_SIZE, 64u);
  EXPECT_EQ(offsetof(dlhost_owned_steps_info, clock), 8u);
  EXPECT_EQ(offsetof(dlhost_owned_steps_info, loop), 16u);
  EXPECT_EQ(DLHOST_OWNED_STEPS_INFO_STRUCT_SIZE, 24u);
  EXPECT_EQ(offsetof(dlhost_step_loop_ext, type), offsetof(dlhost_extension, type));
  EXPECT_EQ(offsetof(dlhost_step_loop_ext, next), offsetof(dlhost_extension, next));
  EXPECT_EQ(offsetof(dlhost_step_loop_ext, run_steps), 24u);
  EXPECT_EQ(DLHOST_STEP_LOOP_EXT_STRUCT_SIZE, 32u);
}

// A struct from a host or network plugin before 1.4 ends at clip_norm: the C++ layer reads what
// it has and gives AdamW's fields PyTorch's defaults instead of reading past its end.
TEST(AbiFreeze, OptimizerOfAnOlderMinorIsCompletedWithDefaults) {
  dlhost_optimizer_desc old{};
  std::memset(&old, 0x7f, sizeof old);  // what lies past an old struct's end: garbage
  old.struct_size = DLHOST_OPTIMIZER_DESC_STRUCT_SIZE_1_0;
  old.kind = DLHOST_OPTIMIZER_SGD;
  old.learning_rate = 0.5f;
  old.clip_norm = 0;
  const dlhost_optimizer_desc whole = dlhost::sdk::whole_optimizer(old);
  EXPECT_EQ(whole.struct_size, DLHOST_OPTIMIZER_DESC_STRUCT_SIZE);
  EXPECT_EQ(whole.learning_rate, 0.5f);
  EXPECT_EQ(whole.beta1, 0.9f);
  EXPECT_EQ(whole.beta2, 0.999f);
  EXPECT_EQ(whole.epsilon, 1e-8f);
  old.struct_size = 8;
  EXPECT_THROW(dlhost::sdk::whole_optimizer(old), dlhost::sdk::Error);
}

TEST(AbiFreeze, DropoutMaskIsPinned) {
  // Every backend must drop the same elements: the mask function may never change.
  int kept = 0;
  for (uint64_t i = 0; i < 10000; ++i) kept += dlhost_dropout_keep(42, 3, 7, i, 0.5f);
  EXPECT_EQ(kept, 5006);
  EXPECT_EQ(dlhost_mix64(0), 0xE220A8397B1DCDAFULL);
}

TEST(AbiFreeze, EnumValuesOfV1) {
  EXPECT_EQ(DLHOST_CODE_INVALID_ARGUMENT, 3);
  EXPECT_EQ(DLHOST_CODE_UNIMPLEMENTED, 12);
  EXPECT_EQ(DLHOST_CODE_UNAVAILABLE, 14);
  EXPECT_EQ(DLHOST_PLUGIN_BACKEND, 1);
  EXPECT_EQ(DLHOST_PLUGIN_COMM, 2);
  EXPECT_EQ(DLHOST_PLUGIN_NETWORK, 3);
  EXPECT_EQ(DLHOST_OP_INPUT, 1);
  EXPECT_EQ(DLHOST_OP_FC, 2);
  EXPECT_EQ(DLHOST_OP_CONV2D, 3);
  EXPECT_EQ(DLHOST_OP_POOL2D, 4);
  EXPECT_EQ(DLHOST_OP_ACTIVATION, 5);
  EXPECT_EQ(DLHOST_OP_SOFTMAX_CROSS_ENTROPY, 6);
  EXPECT_EQ(DLHOST_OP_MSE_LOSS, 7);
  EXPECT_EQ(DLHOST_DTYPE_F32, 1);
  EXPECT_EQ(DLHOST_DTYPE_I32, 2);
  EXPECT_EQ(DLHOST_MEMORY_HOST, 1);
  EXPECT_EQ(DLHOST_MEMORY_DEVICE, 2);
  EXPECT_EQ(DLHOST_REDUCE_SUM, 1);
  EXPECT_EQ(DLHOST_REDUCE_AVG, 2);
  EXPECT_EQ(DLHOST_MAX_RANK, 8);
  // 1.1
  EXPECT_EQ(DLHOST_OP_BATCH_NORM, 8);
  EXPECT_EQ(DLHOST_OP_DROPOUT, 9);
  EXPECT_EQ(DLHOST_OP_ADD, 10);
  EXPECT_EQ(DLHOST_OP_LRN, 11);
  EXPECT_EQ(DLHOST_OP_EMBEDDING, 12);
  EXPECT_EQ(DLHOST_OP_LSTM, 13);
  EXPECT_EQ(DLHOST_OP_GLOBAL_AVG_POOL, 14);
  EXPECT_EQ(DLHOST_INIT_UNIFORM, 5);
  EXPECT_EQ(DLHOST_PARAM_EMBEDDING, 6);
  EXPECT_STREQ(DLHOST_PLUGIN_ENTRY_SYMBOL, "dlhost_plugin_entry");
}

}  // namespace
