# The layers, lowest first. Each is a folder in include/niox/ and src/ and an object library
# niox_<layer>, compiled against a view of the tree that holds only its own layer and the
# layers below it: an upward include is a "No such file" build error, not a convention.
# niox::niox (the installed library) is all of them in one archive.
set(NIOX_LAYERS base buffer ssl channels loop async transport collective)
# Layers that are libraries of their own over niox::niox rather than part of it.
set(NIOX_LAYER_LIBRARY_collective niox-collective)

# niox_add_layers(<target>): defines niox_<layer> for every layer with sources and adds their
# objects to <target>, or to the library NIOX_LAYER_LIBRARY_<layer> names (defined before).
function(niox_add_layers target)
  set(view_root ${PROJECT_BINARY_DIR}/layers)
  set(below "")
  foreach(layer ${NIOX_LAYERS})
    list(APPEND below ${layer})
    set(view ${view_root}/${layer})
    file(MAKE_DIRECTORY ${view}/include/niox ${view}/src)
    foreach(visible ${below})
      foreach(tree include/niox src)
        set(from ${PROJECT_SOURCE_DIR}/${tree}/${visible})
        if(EXISTS ${from} AND NOT EXISTS ${view}/${tree}/${visible})
          file(CREATE_LINK ${from} ${view}/${tree}/${visible} SYMBOLIC)
        endif()
      endforeach()
    endforeach()
    file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${layer}/*.cpp)
    if(NOT sources)
      continue()
    endif()
    set(lib niox_${layer})
    add_library(${lib} OBJECT ${sources})
    # The view comes first; the real tree is not on the path at all.
    target_include_directories(${lib} PRIVATE ${view}/include ${view}/src)
    target_compile_features(${lib} PUBLIC cxx_std_20)
    target_compile_options(${lib} PRIVATE -Wall -Wextra -Wpedantic -Wno-missing-field-initializers)
    target_link_libraries(${lib} PRIVATE fmt::fmt Threads::Threads)
    if(layer STREQUAL "loop")
      target_link_libraries(${lib} PRIVATE Liburing::liburing)
    elseif(layer STREQUAL "ssl")
      target_link_libraries(${lib} PRIVATE OpenSSL::SSL OpenSSL::Crypto)
    endif()
    if(DEFINED NIOX_LAYER_LIBRARY_${layer})
      target_sources(${NIOX_LAYER_LIBRARY_${layer}} PRIVATE $<TARGET_OBJECTS:${lib}>)
    else()
      target_sources(${target} PRIVATE $<TARGET_OBJECTS:${lib}>)
    endif()
  endforeach()
endfunction()

# niox_add_header_checks(): every public header compiled alone, in its own layer's view, so
# that a header needing something it does not include, or a header of a higher layer, fails
# the build.
function(niox_add_header_checks)
  foreach(layer ${NIOX_LAYERS})
    file(GLOB_RECURSE headers CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}/include
         ${PROJECT_SOURCE_DIR}/include/niox/${layer}/*.hpp)
    foreach(h ${headers})
      string(MAKE_C_IDENTIFIER ${h} id)
      set(tu ${PROJECT_BINARY_DIR}/header_checks/${layer}/${id}.cpp)
      if(NOT EXISTS ${tu})
        file(WRITE ${tu} "#include <${h}>\n")
      endif()
      list(APPEND checks_${layer} ${tu})
    endforeach()
    if(checks_${layer})
      add_library(niox_header_check_${layer} OBJECT ${checks_${layer}})
      target_include_directories(niox_header_check_${layer} PRIVATE ${PROJECT_BINARY_DIR}/layers/${layer}/include)
      target_link_libraries(niox_header_check_${layer} PRIVATE fmt::fmt)
      target_compile_features(niox_header_check_${layer} PRIVATE cxx_std_20)
      target_compile_options(niox_header_check_${layer} PRIVATE -Wall -Wextra -Wno-missing-field-initializers)
    endif()
  endforeach()
endfunction()
