#include "io/cluster_routes.hpp"

#include "io/agent_http.hpp"
#include "io/route_ask.hpp"
#include "protocol/cluster.hpp"

#include <caf/all.hpp>

namespace troupe::io {

void add_cluster_routes(router& routes, caf::actor_system& sys, node_store_actor nodes,
                        std::shared_ptr<const node_status> status, const protocol::config& config) {
  routes.add("GET", "/v1/cluster/health", [status](http_request&, std::shared_ptr<http_exchange> ex) {
    auto state = status->current();
    ex->respond(json_response(state == node_status::state::alive ? 200 : 503,
                              protocol::cluster_health_json(to_string(state), status->node_id())));
  });
  routes.add("GET", "/v1/cluster", [&sys, nodes, status, config](http_request& req, std::shared_ptr<http_exchange> ex) {
    if (!operator_allowed(config, req))
      return ex->respond(unauthorized());
    auto self_id = status->node_id();
    ask<node_list>(sys, std::move(ex), nodes,
                   [self_id](node_list& list) { return json_response(200, protocol::cluster_json(list, self_id)); },
                   list_nodes_atom::value);
  });
}

} // namespace troupe::io
