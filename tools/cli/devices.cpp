#include "tools/cli/cli.h"

#include <iostream>
#include <thread>

#include "kernels/cpu/isa.h"
#include "runtime/device_executor.h"

namespace tern::cli {

int devices(int, char**) {
  const char* tier = kernels::isa_name(kernels::default_isa());  // fails on a bad TERN_ISA before printing
  std::cout << "cpu       " << std::thread::hardware_concurrency() << " thread(s), ISA tier " << tier << " (" << kernels::cpu_feature_list()
            << ")\n";
  std::cout << DeviceExecutor::describe_devices();
  return 0;
}

}  // namespace tern::cli
