# Install step of the example configuration and the systemd unit (included by the install
# script CMakeLists.txt generates; SCRY_SRC, SCRY_GEN, SCRY_BINDIR and SCRY_DOCDIR are set
# before it). Their paths depend on the prefix given at install time:
#   prefix /usr (the Debian package)  -> /etc/scry/scry.conf, /usr/lib/systemd/system/
#   prefix P (cmake --install --prefix P)  -> P/etc/scry/scry.conf, P/lib/systemd/system/
# dist/scry.service is written for the package's paths; here /usr/bin/scry, /etc/scry/ and
# /usr/share/doc/scry are replaced by the installed ones, so ExecStart runs the installed
# scry with the installed configuration and Documentation= names installed files.
set(prefix "${CMAKE_INSTALL_PREFIX}")
get_filename_component(prefix_name "${prefix}" NAME)
if(prefix_name STREQUAL "usr")
  get_filename_component(etc "${prefix}" DIRECTORY)
  set(etc "${etc}/etc")
  string(REGEX REPLACE "^//" "/" etc "${etc}")
else()
  set(etc "${prefix}/etc")
endif()

file(INSTALL "${SCRY_SRC}/dist/scry.conf" DESTINATION "${etc}/scry"
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

file(READ "${SCRY_SRC}/dist/scry.service" unit)
string(REPLACE "/usr/bin/scry" "${prefix}/${SCRY_BINDIR}/scry" unit "${unit}")
string(REPLACE "/etc/scry/" "${etc}/scry/" unit "${unit}")
string(REPLACE "/usr/share/doc/scry" "${prefix}/${SCRY_DOCDIR}" unit "${unit}")
file(WRITE "${SCRY_GEN}/scry.service" "${unit}")
file(INSTALL "${SCRY_GEN}/scry.service" DESTINATION "${prefix}/lib/systemd/system"
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
