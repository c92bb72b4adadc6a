/*
 * test_labels.c - method labels ("Worker#park", "Sync.pop", "Kernel#sleep")
 * built by the stack walker from memory images of real Ruby processes, one
 * or more per Ruby version, with that version's generated layout.
 *
 * The images (tests/unit/images/labels-<version>.img) are in fuzz_walk's
 * input format (tests/fuzz/mkseed_walk.c wrote them from a live
 * tests/targets/threads.rb; the README there says how): exactly the memory
 * a walk of every thread read, so a class path, a method entry or a symbol
 * the walker did not find when the image was taken is not in it.  A layout
 * entry that cannot name a class (issue 20: 3.2's class paths were never
 * read) gives bare labels here and fails.
 *
 * Every table entry must be able to name a class (a classpath field, an
 * iv_tbl, or 3.2's shape-indexed iv_ptr); entries without an image of their
 * own are listed on stdout.
 *
 * Run from the top of the tree (tests/run does).
 */
#include "harness.h"
#include "image_vm.h"

#include <dirent.h>
#include <stdlib.h>

/* The labels of every frame of every thread of an image, '\n'-joined with
 * '\n' on both ends; NULL when it does not load.  *version gets its version. */
static char *image_labels(const uint8_t *data, size_t size, char version[33],
			  const struct rbp_layout **layout)
{
	static struct image_vm iv;
	struct rbp_stacks st = { 0 };
	char *out = NULL;

	int bad = image_vm_open(&iv, data, size);
	memcpy(version, iv.version, 33);
	*layout = iv.layout;
	if (bad) {
		image_vm_close(&iv);
		return NULL;
	}
	if (!rbp_vm_read_stacks(iv.vm, &st)) {
		size_t cap = 2;
		for (size_t i = 0; i < st.n_frames; i++)
			cap += strlen(st.frames[i].label ? st.frames[i].label : "") + 1;
		if ((out = malloc(cap))) {
			strcpy(out, "\n");
			for (size_t i = 0; i < st.n_frames; i++) {
				strcat(out, st.frames[i].label ? st.frames[i].label : "");
				strcat(out, "\n");
			}
		}
	}
	rbp_stacks_free(&st);
	image_vm_close(&iv);
	return out;
}

/* 1 when the entry has a way to read a class's path. */
static int can_name_classes(const struct rbp_layout *entry)
{
	struct rbp_layout l;

	rbp_layout_use(&l, entry);
	return l.shape.class_path == RBP_CLASS_FIELD_CLASSEXT ||
	       l.shape.class_ivars != RBP_CLASS_IVARS_NONE;
}

int main(void)
{
	/* labels of tests/targets/threads.rb that need a class path: a C
	 * method (Kernel#sleep, Thread#join), an instance method of a class
	 * (Worker#park), a module's singleton method (Sync.pop), a nested
	 * class (Thread::Queue#pop; a C frame before 4.0, Ruby code after) */
	static const char *const want[] = {
		"Kernel#sleep", "Thread#join", "IO#read", "Worker#park", "Worker#spin",
		"block in Worker#park", "Sync.pop", "Thread::Queue#pop",
	};
	const struct rbp_layout *covered[64] = { 0 };
	size_t n_covered = 0;
	struct dirent **names;
	int n = scandir(IMAGES, &names, NULL, alphasort);

	TEST("images exist") CHECK(n > 2);
	for (int i = 0; i < n; i++) {
		const char *f = names[i]->d_name;
		size_t fl = strlen(f);
		if (fl < 5 || strcmp(f + fl - 4, ".img")) {
			free(names[i]);
			continue;
		}
		char path[600], name[200], version[33];
		const struct rbp_layout *l = NULL;
		size_t size;
		snprintf(path, sizeof(path), "%s/%s", IMAGES, f);
		snprintf(name, sizeof(name), "labels from %.150s", f);
		uint8_t *data = image_slurp(path, &size);
		TEST(name) {
			char *labels = data ? image_labels(data, size, version, &l) : NULL;
			CHECK(labels != NULL);
			for (size_t k = 0; labels && k < sizeof(want) / sizeof(want[0]); k++) {
				char needle[128];
				snprintf(needle, sizeof(needle), "\n%s\n", want[k]);
				if (!strstr(labels, needle)) {
					fprintf(stderr, "FAIL %s: Ruby %s: no frame labelled \"%s\"; labels:%s",
						name, version, want[k], labels);
					harness_cur_failed = 1;
				}
			}
			if (labels && l && n_covered < 64)
				covered[n_covered++] = l;
			free(labels);
		}
		free(data);
		free(names[i]);
	}
	free(n > 0 ? names : NULL);

	TEST("every layout can name a class") {
		for (const struct rbp_layout *l = rbp_layouts; l->version; l++) {
			if (!can_name_classes(l))
				fprintf(stderr, "FAIL every layout can name a class: %s..%s has no "
					"class path field, iv_tbl or shape-indexed iv_ptr\n",
					l->version, l->last);
			CHECK(can_name_classes(l));
		}
	}
	for (const struct rbp_layout *l = rbp_layouts; l->version; l++) {
		int seen = 0;
		for (size_t k = 0; k < n_covered; k++)
			seen |= covered[k] == l;
		if (!seen)
			printf("note: layout %s..%s has no label image in " IMAGES "\n", l->version,
			       l->last);
	}
	return harness_report();
}
