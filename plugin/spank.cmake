# The SPANK side of the plugin: option and argument parsing, the driver check and the step
# environment helpers join railyard_plugin_core (no Slurm needed, so they are unit-tested and
# fuzzed everywhere); the module spank_railyard.so is built only where Slurm's headers exist.

target_sources(railyard_plugin_core PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/plugin_options.cpp
  ${CMAKE_CURRENT_LIST_DIR}/driver_check.cpp
  ${CMAKE_CURRENT_LIST_DIR}/step_env.cpp)

if(RAILYARD_HAVE_SLURM)
  add_library(spank_railyard MODULE ${CMAKE_CURRENT_LIST_DIR}/spank_railyard.cpp)
  set_target_properties(spank_railyard PROPERTIES
    PREFIX ""
    OUTPUT_NAME spank_railyard
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LINK_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/spank_railyard.map)
  target_include_directories(spank_railyard SYSTEM PRIVATE ${SLURM_INCLUDE_DIR})
  # slurmstepd provides the spank_* and slurm_* functions; the module must not pull in
  # libslurm, and only the SPANK entry points and plugin identity are exported.
  target_link_libraries(spank_railyard PRIVATE railyard_plugin_core railyard_warnings)
  target_link_options(spank_railyard PRIVATE
    -Wl,--version-script=${CMAKE_CURRENT_LIST_DIR}/spank_railyard.map
    -Wl,--no-undefined-version)
  install(TARGETS spank_railyard LIBRARY DESTINATION ${RAILYARD_SLURM_PLUGIN_DIR})
endif()
