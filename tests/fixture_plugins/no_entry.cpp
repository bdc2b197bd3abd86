// no_entry.cpp — a test fixture: a valid shared library that is not a dlhost plugin (it lacks
// the entry symbol).
extern "C" __attribute__((visibility("default"))) int not_a_plugin_function(void) { return 42; }
