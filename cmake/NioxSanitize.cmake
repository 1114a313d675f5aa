# NIOX_SANITIZE=address,undefined | thread: applies to everything built in this tree.
if(NIOX_SANITIZE)
  set(_niox_san_flags -fsanitize=${NIOX_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options(${_niox_san_flags})
  add_link_options(-fsanitize=${NIOX_SANITIZE})
  message(STATUS "niox: building with -fsanitize=${NIOX_SANITIZE}")
endif()
