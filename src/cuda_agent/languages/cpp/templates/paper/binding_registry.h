// binding_registry.h -- FIXED FILE (protected). The paper's registry interface, rewritten:
// every kernels/*_binding.cpp registers a function `void register_x(pybind11::module& m)` with
// REGISTER_BINDING(x, register_x); binding.cpp applies them all to the `cuda_extension` module.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

class BindingRegistry {
 public:
  using BindingFunction = std::function<void(pybind11::module&)>;

  static BindingRegistry& getInstance() {
    static BindingRegistry registry;
    return registry;
  }
  void registerBinding(const std::string& name, BindingFunction fn) { entries_.emplace_back(name, std::move(fn)); }
  void applyBindings(pybind11::module& m) {
    for (auto& entry : entries_) entry.second(m);
  }

 private:
  BindingRegistry() = default;
  std::vector<std::pair<std::string, BindingFunction>> entries_;
};

class BindingRegistrar {
 public:
  BindingRegistrar(const std::string& name, BindingRegistry::BindingFunction fn) {
    BindingRegistry::getInstance().registerBinding(name, std::move(fn));
  }
};

#define REGISTER_BINDING(name, fn) \
  static BindingRegistrar _binding_registrar_##name(#name, [](pybind11::module& m) { fn(m); })
