# FindDeps.cmake — at_find_dep: one dependency as the imported target PkgConfig::<PREFIX>, by
# pkg-config when there is one, else by its header and library found with find_path/find_library
# (CMAKE_PREFIX_PATH first: a dependency folder unpacked by benchmarks/gpu/fetch-deps.sh), so the
# build needs no pkg-config where that folder is given.

# at_find_dep(PREFIX module header library [find_path options]): e.g. at_find_dep(LMDB lmdb
# lmdb.h lmdb); the include folder is the one pkg-config would give (cjson: PATH_SUFFIXES cjson).
function(at_find_dep prefix module header library)
  if(TARGET PkgConfig::${prefix})
    return()
  endif()
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(${prefix} QUIET IMPORTED_TARGET GLOBAL ${module})
    if(TARGET PkgConfig::${prefix})
      message(STATUS "${module}: pkg-config")
      return()
    endif()
  endif()
  find_path(AT_${prefix}_INCLUDE_DIR ${header} ${ARGN})
  find_library(AT_${prefix}_LIBRARY ${library})
  if(NOT AT_${prefix}_INCLUDE_DIR OR NOT AT_${prefix}_LIBRARY)
    message(FATAL_ERROR "${module} not found: pkg-config ${module} failed or is missing, and no "
                        "${header} (${AT_${prefix}_INCLUDE_DIR}) with library ${library} "
                        "(${AT_${prefix}_LIBRARY}) is in CMAKE_PREFIX_PATH or the system folders")
  endif()
  add_library(PkgConfig::${prefix} INTERFACE IMPORTED GLOBAL)
  set_target_properties(
    PkgConfig::${prefix} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${AT_${prefix}_INCLUDE_DIR}"
                                    INTERFACE_LINK_LIBRARIES "${AT_${prefix}_LIBRARY}")
  message(STATUS "${module}: ${AT_${prefix}_LIBRARY} (no pkg-config)")
endfunction()
