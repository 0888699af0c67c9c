#pragma once
/// @file watch_view.hpp
/// The screen `tessera watch` redraws: pure functions from the control API's answers
/// (docs/api.md: GET /v1/cluster, /v1/jobs, /v1/nodes) to text, so the view is tested without
/// a server or a terminal. Fields an older server leaves out show as "-" or "?"; nothing here
/// throws on any JSON value.

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace tessera::cli {

/// A progress bar of steps/total exactly `width` display columns wide (0 when width <= 0):
/// "[#######.......]  52%". The fill is floor(steps/total * inner) of the inner columns
/// (steps/total clamped to [0, 1]; a full bar only when done); with `unicode`, block
/// characters fill in eighths of a column ("[█████▍   ]  52%"). The percentage is rounded
/// down; a total that is not positive shows an empty bar and "-". Under 8 columns the bar
/// is left out and only the percentage (cut to the width) remains.
std::string progress_bar(double steps, double total, int width, bool unicode);

/// Time left at the current rate: (total - steps) / steps_per_second as format_duration's
/// text; "-" when the total or the rate is not positive or not finite.
std::string format_eta(double steps, double total, double steps_per_second);

/// Whole seconds as "42s", "3m05s", "1h02m", "2d03h" (">999d" beyond); "-" when negative or
/// not finite.
std::string format_duration(double seconds);

/// Columns `text` takes on a terminal: its code points, ANSI escape sequences ("\x1b[...m")
/// not counted. (East Asian wide characters count as one.)
std::size_t display_width(std::string_view text);

/// One screen of `tessera watch`, lines ending in '\n', none wider than `width` columns
/// (80 when width <= 0):
///   a header line: policy, round, uptime, nodes alive/total, job counts by state;
///   the jobs (GET /v1/jobs, in its order): id, kind, state, progress bar, steps/total,
///   steps/s, ETA, loss;
///   the nodes (GET /v1/nodes): rank, name, GPU type and count, state, assignment.
/// `jobs` and `nodes` are the answers ({"jobs": [..]}, {"nodes": [..]}) or the bare arrays.
/// `use_color` adds ANSI colours (states, lost nodes); `unicode` draws the bars with block
/// characters. Strings from the server are shown with control characters replaced by '?', so
/// a job's kind cannot move the cursor or change the terminal.
std::string render_watch(const nlohmann::json& cluster, const nlohmann::json& jobs,
                         const nlohmann::json& nodes, int width, bool use_color,
                         bool unicode = false);

}  // namespace tessera::cli
