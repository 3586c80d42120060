// The one translation unit that compiles Boost.Beast and Boost.Asio (separate compilation).
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
