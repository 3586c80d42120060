// A TCP relay on 127.0.0.1 in front of a server, one connection at a time, that can cut a connection
// right after the client sent a message containing a marker: the server receives the message, the
// client never hears the answer. It makes "the connection was lost during COMMIT" happen on purpose.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

namespace troupe::test {

class cut_proxy {
public:
  explicit cut_proxy(uint16_t server_port) : server_port_(server_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = loopback(0);
    if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0
        || ::listen(listener_, 4) != 0)
      throw std::runtime_error("cut_proxy: cannot listen on 127.0.0.1");
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }

  ~cut_proxy() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }

  cut_proxy(const cut_proxy&) = delete;
  cut_proxy& operator=(const cut_proxy&) = delete;

  uint16_t port() const { return port_; }

  // The next client message containing `marker` reaches the server, then both sides are closed.
  void cut_after(std::string marker) {
    std::lock_guard<std::mutex> hold(mutex_);
    marker_ = std::move(marker);
  }

  int cuts() const { return cuts_; }

private:
  static sockaddr_in loopback(uint16_t port) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return addr;
  }

  static bool write_all(int fd, const char* data, ssize_t n) {
    while (n > 0) {
      auto w = ::write(fd, data, static_cast<size_t>(n));
      if (w <= 0)
        return false;
      data += w;
      n -= w;
    }
    return true;
  }

  // Whether `data` holds the marker; the marker is then spent.
  bool cut_here(const std::string& data) {
    std::lock_guard<std::mutex> hold(mutex_);
    if (marker_.empty() || data.find(marker_) == std::string::npos)
      return false;
    marker_.clear();
    return true;
  }

  void relay(int client) {
    int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = loopback(server_port_);
    if (server < 0 || ::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(server);
      return;
    }
    char buf[65536];
    while (!stop_) {
      pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(fds, 2, 50) <= 0)
        continue;
      if (fds[0].revents) {
        auto n = ::read(client, buf, sizeof buf);
        if (n <= 0 || !write_all(server, buf, n))
          break;
        if (cut_here(std::string(buf, static_cast<size_t>(n)))) {
          // The client hears nothing more; the server reads the message, then the end of the stream,
          // and its answer is read here and dropped.
          ::shutdown(client, SHUT_RDWR);
          ::shutdown(server, SHUT_WR);
          pollfd rest{server, POLLIN, 0};
          while (::poll(&rest, 1, 2000) > 0 && ::read(server, buf, sizeof buf) > 0) {
          }
          ++cuts_;
          break;
        }
      }
      if (fds[1].revents) {
        auto n = ::read(server, buf, sizeof buf);
        if (n <= 0 || !write_all(client, buf, n))
          break;
      }
    }
    ::close(server);
  }

  void serve() {
    while (!stop_) {
      pollfd fd{listener_, POLLIN, 0};
      if (::poll(&fd, 1, 50) <= 0)
        continue;
      int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0)
        continue;
      relay(client);
      ::close(client);
    }
  }

  uint16_t server_port_;
  int listener_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::string marker_;
  std::atomic<int> cuts_{0};
  std::thread thread_;
};

} // namespace troupe::test
