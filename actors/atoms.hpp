// The message tags of troupe's actors, named for the verb.
#pragma once

#include <caf/atom.hpp>

namespace troupe {

using start_atom = caf::atom_constant<caf::atom("start")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
using cancel_all_atom = caf::atom_constant<caf::atom("cancel_all")>;
using event_atom = caf::atom_constant<caf::atom("event")>;
using run_end_atom = caf::atom_constant<caf::atom("run_end")>;
using model_done_atom = caf::atom_constant<caf::atom("model_done")>;
using tool_done_atom = caf::atom_constant<caf::atom("tool_done")>;
using tool_result_atom = caf::atom_constant<caf::atom("tool_res")>;
using timeout_atom = caf::atom_constant<caf::atom("timeout")>;
using spawn_run_atom = caf::atom_constant<caf::atom("spawn_run")>;
using count_atom = caf::atom_constant<caf::atom("count")>;
using save_session_atom = caf::atom_constant<caf::atom("save_sess")>;
using get_session_atom = caf::atom_constant<caf::atom("get_sess")>;
using save_run_atom = caf::atom_constant<caf::atom("save_run")>;
using flush_atom = caf::atom_constant<caf::atom("flush")>;
using mcp_call_atom = caf::atom_constant<caf::atom("mcp_call")>;
using mcp_message_atom = caf::atom_constant<caf::atom("mcp_msg")>;
using mcp_closed_atom = caf::atom_constant<caf::atom("mcp_closed")>;
using status_atom = caf::atom_constant<caf::atom("status")>;
using restart_atom = caf::atom_constant<caf::atom("restart")>;
using start_timeout_atom = caf::atom_constant<caf::atom("start_tmo")>;
using retry_atom = caf::atom_constant<caf::atom("retry")>;
using get_run_atom = caf::atom_constant<caf::atom("get_run")>;

} // namespace troupe
