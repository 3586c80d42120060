// The message a store adapter sends itself to commit the writes it gathered (a group commit). It is
// no part of any store port: each adapter's actor is its port `batching` this one message more.
#pragma once

#include <caf/atom.hpp>
#include <caf/replies_to.hpp>

namespace troupe::io {

using flush_atom = caf::atom_constant<caf::atom("flush")>;

template <class Port>
using batching = typename Port::template extend<caf::reacts_to<flush_atom>>;

} // namespace troupe::io
