#pragma once
/// @file devices.hpp
/// A node's GPUs as plain data (no CUDA header: runtime/node/gpu/cuda_probe.hpp finds them):
/// the table that maps a device's model name to the cluster file's GPU type, the check of
/// the devices found against the node's server entry, and the assignment of concrete device
/// indices to the copies a node runs in a round.
///
/// Model names to types. A model name is split into tokens at every character that is not a
/// letter or digit and lower-cased ("Tesla V100-SXM2-16GB" -> tesla, v100, sxm2, 16gb); the
/// first token the table knows gives the type (v100). The table holds the data-centre models
/// (k80, p100, v100/v100s, t4, a10/a10g, a30, a40, a100, l4, l40/l40s, h100, h200, ...).
/// A model the table does not know still matches a server whose gpu_type is one of its
/// tokens ("NVIDIA GeForce RTX 4090" matches gpu_type "4090"), so a cluster file can name
/// any GPU without a change here.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/model.hpp"
#include "runtime/core/result.hpp"

namespace tessera::gpu {

/// One GPU as the node process sees it.
struct device_info {
  int index = 0;                   ///< CUDA device ordinal in this process (0 .. count-1)
  std::string name;                ///< model name as the driver gives it
  std::uint64_t memory_bytes = 0;  ///< total device memory; 0 = unknown (a fake device)
};

/// The cluster file's GPU type of a model name through the table (see the file comment);
/// nullopt when none of its tokens is in the table.
std::optional<std::string> type_of_model(const std::string& model);

/// The table's type names, sorted and comma-separated (for messages).
std::string known_types();

/// True when `d` is of the cluster file's type `type` (lower-case): the table's type of its
/// model, or, for a model the table does not know, one of the model's tokens.
bool is_of_type(const device_info& d, const std::string& type);

/// One line for messages: "0: NVIDIA H100 80GB HBM3 (79.6 GiB, type h100)".
std::string describe(const device_info& d);

/// Checks the devices a node found against its server entry: as many as the entry's `gpus`,
/// each of its `gpu_type`. The error (invalid_input) names `where` (the cluster file), the
/// server, the field that disagrees, what the entry declares and every device found.
status check_devices(const server& srv, const std::vector<device_info>& found,
                     const std::string& where);

/// Concrete device indices for the copies (or parts of copies) a node runs in one round:
/// copy i gets want[i] distinct indices of the node's `gpus`, handed out in order, so the
/// same round always gets the same indices and no index is given twice. An error when the
/// round asks for more than `gpus` in all, or a copy for a negative number.
result<std::vector<std::vector<int>>> assign_devices(const std::vector<std::int32_t>& want,
                                                     int gpus);

/// The CUDA_VISIBLE_DEVICES value giving a child process the node's devices `indices`.
/// `node_visible` is the node process's own CUDA_VISIBLE_DEVICES ("" = unset): when set, its
/// device i is that list's i-th entry (an ordinal or a UUID), which the child must be given
/// instead of i. An index past that list is passed as it is.
/// As above, with space sharing: `partner[i]` is the index (into `want`) of the copy sharing
/// copy i's GPUs, -1 for none. A pair (i names j and j names i, both wanting as many GPUs)
/// gets one set of indices, given to both and counted once against `gpus`; no index is given
/// to more than two copies. An error for a partner that is out of range, itself, not naming
/// back, or wanting another count.
result<std::vector<std::vector<int>>> assign_devices(const std::vector<std::int32_t>& want,
                                                     const std::vector<int>& partner, int gpus);

std::string visible_devices(const std::vector<int>& indices, const std::string& node_visible);

}  // namespace tessera::gpu
