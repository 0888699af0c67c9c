#pragma once
/// @file copy_efficiency.hpp
/// Statistical efficiency of a forked job's averaged copies (HadarE): how many single-copy
/// steps one round of C copies, merged by averaging their parameters, is worth.
///
/// Model: the gradient-noise scale of large-batch training (McCandlish et al. 2018, "An
/// Empirical Model of Large-Batch Training"). Steps to a target at batch B are
/// S(B) = S_min (1 + B_noise / B), so one step at batch B is worth (1 + B_noise/B) /
/// (1 + B_noise/B') steps at batch B'. C copies that each make k steps at batch B from the
/// same start and are then averaged move the model like k steps at batch C B (the gradient
/// part of the C updates is averaged, their independent noise divides by C). So the C k steps
/// the copies made are worth k (1 + B_noise/B) / (1 + B_noise/(C B)) single-copy steps: per
/// copy-step the efficiency is
///
///     eff(C, B) = (B + B_noise) / (C B + B_noise)
///
/// 1 for one copy, close to 1 when the gradient noise dominates (B << B_noise: averaging
/// copies is as good as making their steps in a row, the old upper bound), 1/C when the
/// gradient dominates (B >> B_noise: the average moves no further than one copy).
///
/// Copies with unequal step counts n_c (heterogeneous GPUs), merged with weights w_c (sum 1):
/// the merged update is sum w_c (n_c steps of copy c); its gradient part is k = sum w_c n_c
/// steps and its noise variance that of sum w_c^2 n_c single steps, i.e. k steps at batch
/// B_eff = B k / sum w_c^2 n_c. Its worth is k (1 + B_noise/B) / (1 + B_noise/B_eff)
/// (averaged_round_value). For the runtime's default merge, the plain mean (w_c = 1/C), this is
/// exactly eff(C, B) times the copies' total steps whatever their split, so the simulator
/// charges a forked job eff(C, B) times the sum of its copies' steps (C = copies run that
/// round). It can be less than the fastest copy alone: averaging pulls the fast copy back to
/// the slow ones, as measured (docs/benchmarks/runtime.md, "Forked copies' statistical
/// efficiency: the fit").
///
/// Calibration (docs/design.md, "Forked copies' statistical efficiency"): B_noise = 74
/// samples, fitted by least squares in log efficiency to the 23 forked-vs-unforked runs
/// measured in the runtime (bench/fork_merge_bench.cpp at batch 8 and 32, the MPI fork run
/// at batch 8, bench/program_fork_rounds.py at batch 32), with efficiencies measured above 1
/// taken as 1: the model never credits more than the copies' steps in a row. The batch of a
/// Gavel job type is read from its name ("ResNet-18 (batch size 64)"); a type naming none
/// (A3C, CycleGAN) is charged at `default_batch`, the calibration runs' batch.

#include <optional>
#include <string>
#include <vector>

namespace tessera {

/// Per copy-step efficiency of `copies` copies (>= 1) at per-copy batch `batch` (> 0) whose
/// parameters are averaged: (batch + b_noise) / (copies * batch + b_noise), in [1/copies, 1].
/// Exactly 1 for one copy; 1 when b_noise is infinite.
double averaged_copy_efficiency(int copies, double batch, double b_noise);

/// Single-copy steps one merge of copies that made `steps[c]` steps each, weighted by
/// `weights[c]` (non-negative, summing to 1; same length), is worth at batch `batch` (> 0).
/// 0 when no copy made a step.
double averaged_round_value(const std::vector<double>& steps, const std::vector<double>& weights,
                            double batch, double b_noise);

/// The batch size a Gavel job type names, "(batch size N)"; nullopt when it names none.
std::optional<double> batch_size_of(const std::string& job_type);

/// The simulator's setting: whether forked copies are charged their statistical efficiency
/// (on by default) or counted at full value (off: the upper bound of the old model).
struct copy_efficiency {
  bool enabled = true;
  double b_noise = 74;        ///< gradient-noise scale, samples (> 0; calibrated)
  double default_batch = 32;  ///< batch of job types that name none (> 0)

  /// Efficiency charged to a job of type `job_type` running as `copies` copies in a round:
  /// 1 when disabled or for one copy.
  double factor(const std::string& job_type, int copies) const;
};

}  // namespace tessera
