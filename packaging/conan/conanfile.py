# A Conan 2 recipe for the corolock library, built from this source tree:
#   conan create packaging/conan --build=missing
# The library alone (no tests, examples, tool or benchmarks). The ZooKeeper
# backend needs the ZooKeeper C client, which ConanCenter does not have: it
# is left out (zk:// URLs are then refused with error::invalid_url).
# test/package/check_recipes.cmake keeps the version, the exported sources
# and the options in step with CMakeLists.txt.
import os

from conan import ConanFile
from conan.tools.cmake import CMake, CMakeDeps, CMakeToolchain, cmake_layout
from conan.tools.files import copy


class CorolockConan(ConanFile):
    name = "corolock"
    version = "0.1.0"
    description = ("C++20 coroutine client for distributed locks on Boost.Asio: Redis "
                   "(single, Sentinel, Cluster, RedLock), etcd, ZooKeeper, PostgreSQL")
    topics = ("distributed-lock", "redis", "etcd", "postgresql", "asio", "coroutines")
    settings = "os", "arch", "compiler", "build_type"
    options = {"shared": [True, False], "fPIC": [True, False], "postgresql": [True, False]}
    default_options = {"shared": False, "fPIC": True, "postgresql": True}
    # What CMakeLists.txt reads when it builds the library alone, copied
    # from the source tree two levels up.
    corolock_sources = ("CMakeLists.txt", "cmake/*", "include/*", "src/*", "packaging/*")

    def export_sources(self):
        root = os.path.join(self.recipe_folder, "..", "..")
        for pattern in self.corolock_sources:
            copy(self, pattern, root, self.export_sources_folder)

    def layout(self):
        cmake_layout(self)

    def requirements(self):
        self.requires("boost/1.81.0", transitive_headers=True)
        self.requires("openssl/[>=3 <4]", transitive_headers=True)
        self.requires("spdlog/1.10.0", transitive_headers=True)
        if self.options.postgresql:
            self.requires("libpq/15.4")

    def generate(self):
        toolchain = CMakeToolchain(self)
        toolchain.variables["COROLOCK_WITH_POSTGRESQL"] = bool(self.options.postgresql)
        toolchain.variables["COROLOCK_WITH_ZOOKEEPER"] = False
        for part in ("TESTS", "EXAMPLES", "TOOLS", "BENCH"):
            toolchain.variables[f"COROLOCK_BUILD_{part}"] = False
        toolchain.generate()
        CMakeDeps(self).generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def package(self):
        CMake(self).install()

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "corolock")
        self.cpp_info.set_property("cmake_target_name", "corolock::corolock")
        self.cpp_info.set_property("pkg_config_name", "corolock")
        self.cpp_info.libs = ["corolock"]
