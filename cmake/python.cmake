# python.cmake -- the CPython extension module chunkgen._C and the Python package's
# install rules. Included by CMakeLists.txt; does nothing unless CHUNKGEN_PYTHON is ON
# (pyproject.toml sets it for `pip install .`).
#
# Only the install COMPONENT "python" goes into the wheel (pyproject.toml:
# install.components): the module, the `chunkgen` CLI (the console script) and nothing
# of the C library's own install rules.
option(CHUNKGEN_PYTHON "Build the Python extension module chunkgen._C" OFF)
if(NOT CHUNKGEN_PYTHON)
  return()
endif()

find_package(Python 3.9 REQUIRED COMPONENTS Interpreter Development.Module)
# Debian's static Lua and jansson archives are not position-independent code, so the
# shared module links their shared libraries (chunkgen_lib's own objects are PIC).
find_library(CG_PY_LUA_LIB NAMES lua5.4 REQUIRED)
find_library(CG_PY_JANSSON_LIB NAMES jansson REQUIRED)

# The library's objects (not the target: it would bring the static Lua/jansson).
Python_add_library(_C MODULE WITH_SOABI ${PROJECT_SOURCE_DIR}/python/src/cg_module.c
  ${PROJECT_SOURCE_DIR}/python/src/cg_args.c
  ${PROJECT_SOURCE_DIR}/python/src/cg_op_view.c ${PROJECT_SOURCE_DIR}/python/src/cg_store_py.c
  $<TARGET_OBJECTS:chunkgen_lib> ${CG_CPU_ISA_OBJECTS})
# The public header only (issue #34).
target_include_directories(_C PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_compile_options(_C PRIVATE ${CG_WARN})
target_link_libraries(_C PRIVATE ${CG_PY_LUA_LIB} ${CG_PY_JANSSON_LIB} Threads::Threads ${CMAKE_DL_LIBS} m)
# Keep the library's symbols inside the module.
target_link_options(_C PRIVATE -Wl,--exclude-libs,ALL)

# Relocatable: the package (a wheel: scripts/wheel.sh) carries no path of this checkout or
# build tree. __FILE__ in the library's messages becomes relative to the checkout, and the
# emulator's fallback to <checkout>/emulator/cg_emu.h (CG_SOURCE_DIR) goes: the header is
# embedded (cmake/emulator.cmake), and CHUNKGEN_LUA_PATH still reads a checkout on request.
# The CPU variants keep their portable per-ISA flags (no -march=native unless CHUNKGEN_NATIVE).
get_target_property(CG_PY_LIB_DEFS chunkgen_lib COMPILE_DEFINITIONS)
list(FILTER CG_PY_LIB_DEFS EXCLUDE REGEX "^CG_SOURCE_DIR=")
set_property(TARGET chunkgen_lib PROPERTY COMPILE_DEFINITIONS "${CG_PY_LIB_DEFS}")
set(CG_PY_PREFIX_MAP -ffile-prefix-map=${PROJECT_SOURCE_DIR}/= -ffile-prefix-map=${PROJECT_BINARY_DIR}/=)
foreach(t chunkgen_lib ${CG_CPU_ISA_LIBS} chunkgen _C)
  target_compile_options(${t} PRIVATE ${CG_PY_PREFIX_MAP})
endforeach()

install(TARGETS _C LIBRARY DESTINATION chunkgen COMPONENT python)
install(PROGRAMS $<TARGET_FILE:chunkgen> DESTINATION chunkgen/bin COMPONENT python)

# chunkgen._jax_ffi: the XLA FFI handlers behind chunkgen.jax (python/src/cg_jax_ffi.cc),
# built when the building Python has jaxlib (its FFI headers, jax.ffi.include_dir()).
# Without it chunkgen.jax raises ImportError saying so; nothing else changes.
execute_process(COMMAND ${Python_EXECUTABLE} -c
  "import importlib.util as u, os; s = u.find_spec('jaxlib'); print(os.path.join(os.path.dirname(s.origin), 'include') if s else '')"
  OUTPUT_VARIABLE CG_JAX_FFI_INCLUDE OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(CG_JAX_FFI_INCLUDE AND EXISTS "${CG_JAX_FFI_INCLUDE}/xla/ffi/api/ffi.h")
  message(STATUS "chunkgen: JAX FFI module with headers from ${CG_JAX_FFI_INCLUDE}")
  Python_add_library(_jax_ffi MODULE WITH_SOABI ${PROJECT_SOURCE_DIR}/python/src/cg_jax_ffi.cc
    ${PROJECT_SOURCE_DIR}/python/src/cg_op_view.c $<TARGET_OBJECTS:chunkgen_lib> ${CG_CPU_ISA_OBJECTS})
  target_include_directories(_jax_ffi PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_include_directories(_jax_ffi SYSTEM PRIVATE ${CG_JAX_FFI_INCLUDE})
  target_compile_options(_jax_ffi PRIVATE ${CG_WARN})
  target_link_libraries(_jax_ffi PRIVATE ${CG_PY_LUA_LIB} ${CG_PY_JANSSON_LIB} Threads::Threads ${CMAKE_DL_LIBS} m)
  target_link_options(_jax_ffi PRIVATE -Wl,--exclude-libs,ALL)
  target_compile_options(_jax_ffi PRIVATE ${CG_PY_PREFIX_MAP})
  install(TARGETS _jax_ffi LIBRARY DESTINATION chunkgen COMPONENT python)
else()
  message(STATUS "chunkgen: no jaxlib in ${Python_EXECUTABLE}: chunkgen.jax not built")
endif()
