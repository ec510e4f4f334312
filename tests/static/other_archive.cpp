// tests/static/other_archive.cpp — code in a static archive other than
// libgort.a, linked into static_test: preempt/gort_text.ld puts it in
// gort_archives_text, which is not preempted unless registered.
int other_archive_function(int x) { return x * 3 + 1; }
