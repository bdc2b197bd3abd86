// served_store.cpp — see served_store.h.
#include "launch/served_store.h"

#include <cstring>

extern char** environ;

namespace dlhost {

ServedStore::ServedStore(const std::string& address)
    : server_(std::make_unique<RendezvousServer>(make_store_secret(), address)),
      variable_("DLHOST_STORE=" + server_->variable_value(address)) {
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "DLHOST_STORE=", 13) != 0) env_.push_back(*e);
  env_.push_back(variable_.data());
  env_.push_back(nullptr);
}

}  // namespace dlhost
