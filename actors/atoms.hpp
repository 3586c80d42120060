// The message tags of troupe's actors, named for the verb.
#pragma once

#include <caf/atom.hpp>

namespace troupe {

using start_atom = caf::atom_constant<caf::atom("start")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
using cancel_all_atom = caf::atom_constant<caf::atom("cancel_all")>;
using event_atom = caf::atom_constant<caf::atom("event")>;
using run_end_atom = caf::atom_constant<caf::atom("run_end")>;
using tool_done_atom = caf::atom_constant<caf::atom("tool_done")>;
using tool_result_atom = caf::atom_constant<caf::atom("tool_res")>;
using timeout_atom = caf::atom_constant<caf::atom("timeout")>;
using spawn_run_atom = caf::atom_constant<caf::atom("spawn_run")>;
using count_atom = caf::atom_constant<caf::atom("count")>;
using save_session_atom = caf::atom_constant<caf::atom("save_sess")>;
using get_session_atom = caf::atom_constant<caf::atom("get_sess")>;
using mcp_call_atom = caf::atom_constant<caf::atom("mcp_call")>;
using mcp_message_atom = caf::atom_constant<caf::atom("mcp_msg")>;
using mcp_closed_atom = caf::atom_constant<caf::atom("mcp_closed")>;
using status_atom = caf::atom_constant<caf::atom("status")>;
using restart_atom = caf::atom_constant<caf::atom("restart")>;
using start_timeout_atom = caf::atom_constant<caf::atom("start_tmo")>;
using retry_atom = caf::atom_constant<caf::atom("retry")>;
using get_run_atom = caf::atom_constant<caf::atom("get_run")>;
using create_run_atom = caf::atom_constant<caf::atom("create_run")>;
using begin_chat_atom = caf::atom_constant<caf::atom("begin_chat")>;
using claim_atom = caf::atom_constant<caf::atom("claim")>;
using append_atom = caf::atom_constant<caf::atom("append")>;
using transition_atom = caf::atom_constant<caf::atom("transit")>;
using renew_atom = caf::atom_constant<caf::atom("renew")>;
using recover_atom = caf::atom_constant<caf::atom("recover")>;
using list_runs_atom = caf::atom_constant<caf::atom("list_runs")>;
using events_atom = caf::atom_constant<caf::atom("events")>;
using list_traces_atom = caf::atom_constant<caf::atom("traces")>;
using get_trace_atom = caf::atom_constant<caf::atom("get_trace")>;
using submit_atom = caf::atom_constant<caf::atom("submit")>;
using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;
using attempt_gone_atom = caf::atom_constant<caf::atom("att_gone")>;
using schedule_atom = caf::atom_constant<caf::atom("schedule")>;
using ping_atom = caf::atom_constant<caf::atom("ping")>;
using track_atom = caf::atom_constant<caf::atom("track")>;
using fenced_atom = caf::atom_constant<caf::atom("fenced")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using save_approval_atom = caf::atom_constant<caf::atom("save_appr")>;
using get_approval_atom = caf::atom_constant<caf::atom("get_appr")>;
using settle_approval_atom = caf::atom_constant<caf::atom("set_appr")>;
using list_approvals_atom = caf::atom_constant<caf::atom("list_appr")>;
using audit_atom = caf::atom_constant<caf::atom("audit")>;
using open_approval_atom = caf::atom_constant<caf::atom("open_appr")>;
using await_atom = caf::atom_constant<caf::atom("await")>;
using resolve_atom = caf::atom_constant<caf::atom("resolve")>;
using run_ended_atom = caf::atom_constant<caf::atom("run_ended")>;
using expire_atom = caf::atom_constant<caf::atom("expire")>;
using rate_atom = caf::atom_constant<caf::atom("rate")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;

using save_response_atom = caf::atom_constant<caf::atom("save_resp")>;
using get_response_atom = caf::atom_constant<caf::atom("get_resp")>;
using get_items_atom = caf::atom_constant<caf::atom("get_items")>;
using input_items_atom = caf::atom_constant<caf::atom("in_items")>;
using delete_response_atom = caf::atom_constant<caf::atom("del_resp")>;
using response_events_atom = caf::atom_constant<caf::atom("resp_evts")>;
using unfinished_atom = caf::atom_constant<caf::atom("unfinished")>;
using create_conversation_atom = caf::atom_constant<caf::atom("new_conv")>;
using get_conversation_atom = caf::atom_constant<caf::atom("get_conv")>;
using update_conversation_atom = caf::atom_constant<caf::atom("set_conv")>;
using delete_conversation_atom = caf::atom_constant<caf::atom("del_conv")>;
using add_conversation_items_atom = caf::atom_constant<caf::atom("add_citems")>;
using conversation_items_atom = caf::atom_constant<caf::atom("conv_items")>;
using list_conversation_items_atom = caf::atom_constant<caf::atom("list_citem")>;
using remove_conversation_item_atom = caf::atom_constant<caf::atom("rm_citem")>;
using upstream_atom = caf::atom_constant<caf::atom("upstream")>;
using disconnect_atom = caf::atom_constant<caf::atom("disconnect")>;
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;
using stall_atom = caf::atom_constant<caf::atom("stall")>;
using drained_atom = caf::atom_constant<caf::atom("drained")>;

using command_atom = caf::atom_constant<caf::atom("command")>;
using read_atom = caf::atom_constant<caf::atom("read")>;
using head_atom = caf::atom_constant<caf::atom("head")>;
using wake_atom = caf::atom_constant<caf::atom("wake")>;
using idle_atom = caf::atom_constant<caf::atom("idle")>;
using hello_atom = caf::atom_constant<caf::atom("hello")>;
using frame_atom = caf::atom_constant<caf::atom("frame")>;
using closed_atom = caf::atom_constant<caf::atom("closed")>;
using prune_atom = caf::atom_constant<caf::atom("prune")>;
using appended_atom = caf::atom_constant<caf::atom("appended")>;
using create_response_atom = caf::atom_constant<caf::atom("new_resp")>;
using compact_atom = caf::atom_constant<caf::atom("compact")>;
using release_slot_atom = caf::atom_constant<caf::atom("rel_slot")>;
using acquire_slot_atom = caf::atom_constant<caf::atom("acq_slot")>;

// Cluster membership (actors/node_store.hpp, actors/cluster_membership.hpp).
using join_atom = caf::atom_constant<caf::atom("join")>;
using heartbeat_atom = caf::atom_constant<caf::atom("heartbeat")>;
using declare_dead_atom = caf::atom_constant<caf::atom("dead_nodes")>;
using list_nodes_atom = caf::atom_constant<caf::atom("list_nodes")>;
using cluster_id_atom = caf::atom_constant<caf::atom("cluster_id")>;
using node_state_atom = caf::atom_constant<caf::atom("node_state")>;
using fence_atom = caf::atom_constant<caf::atom("fence")>;
using unfence_atom = caf::atom_constant<caf::atom("unfence")>;
using handback_atom = caf::atom_constant<caf::atom("handback")>;
using drain_atom = caf::atom_constant<caf::atom("drain")>;

} // namespace troupe
