# DlhostBigDL.cmake — what the cpu_bigdl backend (plugins/cpu_bigdl) is built from: a JDK (javac
# compiles the plugin's own Java class at build time; jni.h and libjvm.so host the JVM) and the
# jars scripts/install-deps.sh puts in deps/pypi: BigDL DLlib 2.4.0 and bigdl-core (BigDL's native
# MKL) in deps/pypi/bigdl-2.4.0, Spark 3.1.3's jars with Scala 2.12.15 in deps/pypi/spark-3.1.3.
# Nothing of it is linked: the plugin opens libjvm.so by its full path at its first context.

set(DLHOST_JAVA_HOME "" CACHE PATH
    "The JDK cpu_bigdl hosts (empty: the one whose javac is on PATH; OpenJDK 17 from Debian)")

# dlhost_bigdl(<OUT_FOUND> <OUT_REASON>): finds the above. When found, sets in the caller's scope
# DLHOST_BIGDL_JAVAC, DLHOST_BIGDL_JNI_INCLUDE (jni.h's folders), DLHOST_BIGDL_JVM (libjvm.so),
# DLHOST_BIGDL_JAVA_VERSION ("OpenJDK 17.0.15"), DLHOST_BIGDL_JARS (the class path: BigDL's two
# jars, then Spark's), DLHOST_BIGDL_DLLIB_JAR (what javac compiles against); else OUT_REASON.
function(dlhost_bigdl out_found out_reason)
  set(${out_found} FALSE PARENT_SCOPE)
  # The JDK: DLHOST_JAVA_HOME, else the one javac on PATH belongs to (/usr/bin/javac is a link
  # into /usr/lib/jvm/<jdk>/bin).
  set(_home "${DLHOST_JAVA_HOME}")
  if(NOT _home)
    find_program(_javac_on_path javac)
    if(NOT _javac_on_path)
      set(${out_reason} "no JDK: javac not found (scripts/install-deps.sh installs openjdk-17-jdk-headless)" PARENT_SCOPE)
      return()
    endif()
    file(REAL_PATH "${_javac_on_path}" _javac_real)
    get_filename_component(_home "${_javac_real}" DIRECTORY)
    get_filename_component(_home "${_home}" DIRECTORY)
  endif()
  foreach(_need bin/javac include/jni.h include/linux/jni_md.h lib/server/libjvm.so release)
    if(NOT EXISTS "${_home}/${_need}")
      set(${out_reason} "the JDK in ${_home} has no ${_need} (a JRE, or not a JDK; set DLHOST_JAVA_HOME)" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  file(STRINGS "${_home}/release" _version REGEX "^JAVA_VERSION=")
  string(REGEX REPLACE "^JAVA_VERSION=\"([^\"]*)\".*" "\\1" _version "${_version}")
  string(REGEX MATCH "^[0-9]+" _major "${_version}")
  # Spark 3.1 runs on Java 17 with the --add-opens flags the plugin passes, which a Java 8 JVM
  # refuses; newer JDKs are not what issue 42 checked.
  if(NOT _major OR _major LESS 11)
    set(${out_reason} "the JDK in ${_home} is Java ${_version}; BigDL on Spark 3.1 needs 11 or later (17 checked)" PARENT_SCOPE)
    return()
  endif()
  file(STRINGS "${_home}/release" _vendor REGEX "^IMPLEMENTOR=")
  string(REGEX REPLACE "^IMPLEMENTOR=\"([^\"]*)\".*" "\\1" _vendor "${_vendor}")
  set(_java "OpenJDK ${_version}")
  if(_vendor)
    set(_java "OpenJDK ${_version} (${_vendor})")
  endif()

  # The jars (`pip install --target deps/pypi/bigdl-2.4.0`: the dist-infos sit beside bigdl/).
  set(_bigdl "${DLHOST_PYPI_DIR}/bigdl-2.4.0")
  set(_dllib "${_bigdl}/bigdl/share/dllib/lib/bigdl-dllib-spark_3.1.3-2.4.0-jar-with-dependencies.jar")
  file(GLOB _core "${_bigdl}/bigdl/share/core/lib/all-2.4.0-*.jar")
  if(NOT DLHOST_PYPI_DIR)
    set(${out_reason} "DLHOST_PYPI_DIR is empty (configured without the framework wheels)" PARENT_SCOPE)
    return()
  elseif(EXISTS "${DLHOST_PYPI_DIR}/bigdl-dllib-spark3.failed")
    file(STRINGS "${DLHOST_PYPI_DIR}/bigdl-dllib-spark3.failed" _why LIMIT_COUNT 1)
    set(${out_reason} "${_why}" PARENT_SCOPE)
    return()
  elseif(NOT EXISTS "${_bigdl}/bigdl_dllib_spark3-2.4.0.dist-info" OR NOT EXISTS "${_dllib}" OR
         NOT EXISTS "${_bigdl}/bigdl_core-2.4.0.dev0.dist-info" OR NOT _core)
    set(${out_reason} "the PyPI wheels bigdl-dllib-spark3==2.4.0 and bigdl-core==2.4.0.dev0 are not installed in ${_bigdl} (scripts/install-deps.sh installs them)" PARENT_SCOPE)
    return()
  endif()
  set(_spark "${DLHOST_PYPI_DIR}/spark-3.1.3/jars")
  if(EXISTS "${DLHOST_PYPI_DIR}/pyspark.failed")
    file(STRINGS "${DLHOST_PYPI_DIR}/pyspark.failed" _why LIMIT_COUNT 1)
    set(${out_reason} "${_why}" PARENT_SCOPE)
    return()
  endif()
  if(NOT EXISTS "${_spark}/spark-core_2.12-3.1.3.jar" OR NOT EXISTS "${_spark}/scala-library-2.12.15.jar")
    set(${out_reason} "Spark 3.1.3's jars with Scala 2.12.15 are not in ${_spark} (scripts/install-deps.sh takes them out of pyspark's sdists)" PARENT_SCOPE)
    return()
  endif()
  file(GLOB _spark_jars "${_spark}/*.jar")
  list(SORT _spark_jars)

  set(${out_found} TRUE PARENT_SCOPE)
  set(${out_reason} "" PARENT_SCOPE)
  set(DLHOST_BIGDL_JAVAC "${_home}/bin/javac" PARENT_SCOPE)
  set(DLHOST_BIGDL_JNI_INCLUDE "${_home}/include" "${_home}/include/linux" PARENT_SCOPE)
  set(DLHOST_BIGDL_JVM "${_home}/lib/server/libjvm.so" PARENT_SCOPE)
  set(DLHOST_BIGDL_JAVA_VERSION "${_java}" PARENT_SCOPE)
  set(DLHOST_BIGDL_DLLIB_JAR "${_dllib}" PARENT_SCOPE)
  set(DLHOST_BIGDL_SPARK_HOME "${DLHOST_PYPI_DIR}/spark-3.1.3" PARENT_SCOPE)
  set(DLHOST_BIGDL_JARS "${_dllib}" ${_core} ${_spark_jars} PARENT_SCOPE)
endfunction()
