/* tern's C API by example: load a model folder, stream a continuation of a prompt to stdout.
 *
 *   cc -std=c99 generate.c $(pkg-config --cflags --libs tern) -o generate
 *   ./generate MODEL_DIR "Once upon a time" [MAX_NEW_TOKENS] [THREADS]
 *
 * Prints the prompt, then the new text as it is generated with the model's own sampling (its
 * generation_config.json; greedy when it says nothing): the same text as `tern generate --model MODEL_DIR
 * --prompt ...`. A line on stderr counts the tokens. */
#include <stdio.h>
#include <stdlib.h>

#include <tern/tern.h>

static int print_text(const char* text, size_t length, void* user_data) {
  (void)user_data;
  fwrite(text, 1, length, stdout);
  fflush(stdout);
  return 0; /* non-zero would stop the generation here */
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL_DIR PROMPT [MAX_NEW_TOKENS] [THREADS]\n", argv[0]);
    return 2;
  }
  const char* model_dir = argv[1];
  const char* prompt = argv[2];
  const long max_new_tokens = argc > 3 ? strtol(argv[3], NULL, 10) : 64;
  const int threads = argc > 4 ? (int)strtol(argv[4], NULL, 10) : 0;

  tern_options* options = tern_options_create();
  if (!options || tern_options_set_threads(options, threads) != TERN_OK) {
    fprintf(stderr, "options: %s\n", options ? tern_options_error(options) : "out of memory");
    tern_options_free(options);
    return 1;
  }
  tern_model* model = NULL;
  tern_status status = tern_model_load(model_dir, options, &model);
  tern_options_free(options); /* the model keeps what it needs */
  if (status != TERN_OK) {
    fprintf(stderr, "%s: %s\n", tern_status_name(status), model ? tern_model_error(model) : "out of memory");
    tern_model_free(model);
    return 1;
  }

  tern_generate_params params;
  tern_generate_params_default(&params); /* the model's own sampling, no stop strings */
  params.max_new_tokens = max_new_tokens;
  int64_t generated = 0;
  fputs(prompt, stdout);
  status = tern_generate(model, prompt, &params, print_text, NULL, &generated);
  putchar('\n');
  if (status != TERN_OK) {
    fprintf(stderr, "%s: %s\n", tern_status_name(status), tern_model_error(model));
    tern_model_free(model);
    return 1;
  }
  fprintf(stderr, "%lld tokens generated (%s)\n", (long long)generated, tern_build_info());
  tern_model_free(model);
  return 0;
}
