// SPDX-License-Identifier: Apache-2.0
/*
 * regress_main.c - replays fuzz corpora without libFuzzer.
 *
 * Usage: fuzz_regress_<name> DIR|FILE...  Every regular file is passed once
 * to LLVMFuzzerTestOneInput in a buffer of exactly its size (heap, so ASan
 * catches one-byte overreads). A crash fails the test; at the end it prints
 * "N passed, 0 failed" where N is the number of inputs replayed, and an empty
 * corpus is an error: a replay of nothing proves nothing.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	long n;

	if (f == NULL) {
		perror(path);
		return -1;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		return -1;
	}
	buf = malloc(n > 0 ? (size_t)n : 1);
	if (buf == NULL || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)n);
	free(buf);
	return 0;
}

int
main(int argc, char **argv)
{
	unsigned long count = 0;

	for (int i = 1; i < argc; i++) {
		struct stat st;
		struct dirent *de;
		DIR *d;

		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (replay_file(argv[i]) != 0)
				return 1;
			count++;
			continue;
		}
		d = opendir(argv[i]);
		if (d == NULL) {
			perror(argv[i]);
			return 1;
		}
		while ((de = readdir(d)) != NULL) {
			char path[4096];

			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
			if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
				continue;
			if (replay_file(path) != 0) {
				closedir(d);
				return 1;
			}
			count++;
		}
		closedir(d);
	}
	if (count == 0) {
		fprintf(stderr, "no corpus inputs found\n");
		return 1;
	}
	printf("%lu passed, 0 failed\n", count);
	return 0;
}
