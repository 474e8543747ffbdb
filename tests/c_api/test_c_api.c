/* The C API from C (compiled as C99 with -pedantic): statuses and messages for each kind of bad call, the
 * step API against tern_generate, tokenizer round trips, sampling, stop strings, callbacks, graph runs.
 * Values checked against the C++ library's own path live in tests/test_c_api.cpp.
 *   test_c_api MODEL_DIR ONNX_FILE BAD_INPUTS_DIR
 *   (tern's models/default, examples/tiny_llama_block/model.onnx, tests/bad_inputs/onnx_model) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

static int failures = 0;
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

typedef struct {
  char text[4096];
  size_t length;
  int calls, stop_after; /* stop_after > 0: the callback says stop at that call */
} collected;

static int collect(const char* text, size_t length, void* user_data) {
  collected* c = (collected*)user_data;
  if (c->length + length < sizeof c->text) {
    memcpy(c->text + c->length, text, length);
    c->length += length;
    c->text[c->length] = '\0';
  }
  ++c->calls;
  return c->stop_after > 0 && c->calls >= c->stop_after;
}

static void check_options(void) {
  tern_options* o = tern_options_create();
  CHECK(o != NULL);
  CHECK(tern_options_set_threads(o, -1) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(tern_options_error(o), "threads -1") != NULL);
  CHECK(tern_options_set_device(o, "tpu") != TERN_OK);
  CHECK(strstr(tern_options_error(o), "tpu") != NULL);
  CHECK(tern_options_set_weights(o, "fp8") != TERN_OK);
  CHECK(tern_options_set_isa(o, "sse9") == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(tern_options_set_isa(o, NULL) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(tern_options_set_window(o, -5) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(tern_options_set_threads(o, 2) == TERN_OK);
  CHECK(tern_options_set_threads(NULL, 2) == TERN_ERROR_INVALID_ARGUMENT);
  tern_options_free(o);
  tern_options_free(NULL);
}

static void check_load_failures(void) {
  tern_model* m = NULL;
  CHECK(tern_model_load("/nonexistent/model-folder", NULL, &m) == TERN_ERROR_MODEL);
  CHECK(m != NULL);
  CHECK(strstr(tern_model_error(m), "/nonexistent/model-folder") != NULL);
  /* a handle that did not load refuses everything else, by status */
  int32_t token = 0;
  CHECK(tern_model_step(m, &token) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(tern_model_set_speculation(m, "ngram", NULL) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(tern_model_set_speculation(NULL, "ngram", NULL) == TERN_ERROR_INVALID_ARGUMENT);
  tern_model_free(m);
  m = NULL;
  CHECK(tern_model_load(NULL, NULL, &m) == TERN_ERROR_INVALID_ARGUMENT);
  tern_model_free(m);
  CHECK(tern_model_load("x", NULL, NULL) == TERN_ERROR_INVALID_ARGUMENT);
  tern_model_free(NULL);
  CHECK(tern_model_step(NULL, &token) == TERN_ERROR_INVALID_ARGUMENT);
}

/* Each class of failure a load can meet comes back as its status, with a message naming what is wrong. */
static void check_load_classes(const char* model_dir, const char* bad) {
  char path[4096];
  tern_graph* g = NULL;
  snprintf(path, sizeof path, "%s/unknown_op.onnx", bad);
  CHECK(tern_graph_load(path, NULL, &g) == TERN_ERROR_UNSUPPORTED);
  tern_graph_free(g);
  g = NULL;
  snprintf(path, sizeof path, "%s/ext_dotdot.onnx", bad); /* external data outside the model folder */
  CHECK(tern_graph_load(path, NULL, &g) == TERN_ERROR_MODEL);
  CHECK(strstr(tern_graph_error(g), "..") != NULL || strstr(tern_graph_error(g), "outside") != NULL);
  tern_graph_free(g);
  g = NULL;
  snprintf(path, sizeof path, "%s/truncated.onnx", bad);
  CHECK(tern_graph_load(path, NULL, &g) == TERN_ERROR_MODEL);
  tern_graph_free(g);
  /* the memory cap: 1 MB cannot hold the default model's packed weights */
  tern_options* o = tern_options_create();
  CHECK(tern_options_set_max_memory(o, 1u << 20) == TERN_OK);
  tern_model* m = NULL;
  CHECK(tern_model_load(model_dir, o, &m) == TERN_ERROR_MEMORY_LIMIT);
  CHECK(strstr(tern_model_error(m), "memory") != NULL);
  tern_model_free(m);
  tern_options_free(o);
}

static void check_model(const char* dir) {
  tern_options* o = tern_options_create();
  tern_options_set_threads(o, 2);
  tern_model* m = NULL;
  const tern_status loaded = tern_model_load(dir, o, &m);
  tern_options_free(o);
  CHECK(loaded == TERN_OK);
  if (loaded != TERN_OK) {
    fprintf(stderr, "load: %s\n", tern_model_error(m));
    tern_model_free(m);
    return;
  }
  tern_model_info info;
  CHECK(tern_model_get_info(m, &info) == TERN_OK);
  CHECK(info.vocab_size > 0 && info.window > 0 && info.bos_token_id >= 0);

  /* tokenize: too small a buffer says how many it needs; then the ids read back as the text */
  const char* prompt = "And God said";
  int32_t ids[64];
  size_t n = 0;
  CHECK(tern_tokenize(m, prompt, 1, ids, 1, &n) == TERN_ERROR_BUFFER_TOO_SMALL);
  CHECK(n > 1);
  CHECK(tern_tokenize(m, prompt, 1, ids, 64, &n) == TERN_OK);
  CHECK(ids[0] == info.bos_token_id);
  char text[4096];
  size_t length = 0;
  CHECK(tern_detokenize(m, ids, n, text, 4, &length) == TERN_ERROR_BUFFER_TOO_SMALL);
  CHECK(length == strlen(prompt));
  CHECK(tern_detokenize(m, ids, n, text, sizeof text, &length) == TERN_OK);
  CHECK(strcmp(text, prompt) == 0);

  /* tern_generate, greedy */
  tern_sampling greedy_sampling;
  tern_sampling_default(&greedy_sampling);
  tern_generate_params p;
  tern_generate_params_default(&p);
  p.max_new_tokens = 16;
  p.sampling = &greedy_sampling;
  collected greedy = {{0}, 0, 0, 0};
  int64_t generated = 0;
  CHECK(tern_generate(m, prompt, &p, collect, &greedy, &generated) == TERN_OK);
  CHECK(generated == 16 && greedy.length > 0);
  CHECK(tern_model_position(m) == (int64_t)n + 15); /* the last token chosen, not fed */

  /* the step API gives the same tokens: the prompt's text plus the streamed text */
  CHECK(tern_model_reset(m) == TERN_OK);
  int32_t token = 0;
  CHECK(tern_model_sample(m, &token) == TERN_ERROR_INVALID_ARGUMENT); /* nothing fed yet */
  CHECK(strstr(tern_model_error(m), "prefill") != NULL);
  CHECK(tern_model_prefill(m, ids, n) == TERN_OK);
  const float* logits = NULL;
  int64_t vocab = 0;
  CHECK(tern_model_logits(m, &logits, &vocab) == TERN_OK);
  CHECK(vocab == info.vocab_size && logits != NULL);
  int32_t seq[80];
  memcpy(seq, ids, n * sizeof ids[0]);
  CHECK(tern_model_set_sampling(m, &greedy_sampling) == TERN_OK);
  for (int i = 0; i < 16; ++i) CHECK(tern_model_step(m, &seq[n + (size_t)i]) == TERN_OK);
  CHECK(tern_detokenize(m, seq, n + 16, text, sizeof text, &length) == TERN_OK);
  CHECK(strncmp(text, prompt, strlen(prompt)) == 0);
  CHECK(strcmp(text + strlen(prompt), greedy.text) == 0);

  /* rewind: back to the prompt, then its next token fed as before gives the same logits bit for bit */
  CHECK(tern_model_rewind(m, n + 17) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(tern_model_error(m), "holds") != NULL);
  float first_logits[4096];
  CHECK(info.vocab_size <= 4096);
  CHECK(tern_model_reset(m) == TERN_OK && tern_model_prefill(m, seq, n) == TERN_OK && tern_model_prefill(m, seq + n, 1) == TERN_OK);
  CHECK(tern_model_logits(m, &logits, &vocab) == TERN_OK);
  memcpy(first_logits, logits, (size_t)vocab * sizeof(float));
  CHECK(tern_model_prefill(m, seq + n + 1, 8) == TERN_OK && tern_model_position(m) == (int64_t)n + 9);
  CHECK(tern_model_rewind(m, n) == TERN_OK && tern_model_position(m) == (int64_t)n);
  CHECK(tern_model_sample(m, &token) == TERN_ERROR_INVALID_ARGUMENT); /* no logits until more is fed */
  CHECK(tern_model_prefill(m, seq + n, 1) == TERN_OK);
  CHECK(tern_model_logits(m, &logits, &vocab) == TERN_OK);
  CHECK(memcmp(logits, first_logits, (size_t)vocab * sizeof(float)) == 0);
  /* set_logits: the next choice is made from the caller's */
  float chosen[4096] = {0};
  chosen[7] = 5.0f;
  CHECK(tern_model_set_logits(m, chosen, vocab + 1) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(tern_model_set_logits(m, chosen, vocab) == TERN_OK);
  CHECK(tern_model_sample(m, &token) == TERN_OK && token == 7);
  /* a vocabulary entry's id; the end tokens; no padding token in this config */
  int32_t piece_id = -1;
  CHECK(tern_token_id(m, "A", &piece_id) == TERN_OK && piece_id >= 0); /* (a byte-level BPE vocabulary) */
  char piece_text[8];
  size_t piece_text_length = 0;
  CHECK(tern_detokenize(m, &piece_id, 1, piece_text, sizeof piece_text, &piece_text_length) == TERN_OK && strcmp(piece_text, "A") == 0);
  CHECK(tern_token_id(m, "no such piece", &piece_id) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(tern_model_error(m), "not in the vocabulary") != NULL);
  int32_t ends[4];
  size_t end_count = 0;
  CHECK(tern_model_end_tokens(m, ends, 4, &end_count) == TERN_OK && end_count == 1 && ends[0] == (int32_t)info.eos_token_id);
  CHECK(tern_model_pad_token_id(m) == -1);
  /* the model's type; a chat template it lacks */
  CHECK(strcmp(tern_model_type(m), "llama") == 0 && strcmp(tern_model_type(NULL), "") == 0);
  const char* user[1] = {"user"};
  const char* hello[1] = {"hello"};
  char formatted[256];
  size_t formatted_length = 0;
  CHECK(tern_chat_format(m, user, hello, 1, formatted, sizeof formatted, &formatted_length) == TERN_ERROR_UNSUPPORTED);
  CHECK(strstr(tern_model_error(m), "no chat template") != NULL);

  /* beam search: one beam is greedy decoding (the step API's 16 tokens above); four keep four ring rows */
  tern_beam_options beam;
  tern_beam_options_default(&beam);
  CHECK(beam.num_beams == 4 && beam.num_return_sequences == 1 && beam.max_new_tokens == 128);
  const int32_t* prompts[1] = {seq};
  size_t prompt_lengths[1] = {n};
  const int32_t* found = NULL;
  size_t found_count = 0;
  int done = 0;
  CHECK(tern_beam_search_step(m, &done) == TERN_ERROR_INVALID_ARGUMENT); /* none started */
  CHECK(strstr(tern_model_error(m), "tern_beam_search_start") != NULL);
  beam.num_beams = 1;
  beam.max_new_tokens = 16;
  CHECK(tern_beam_search_start(m, prompts, prompt_lengths, 1, &beam) == TERN_OK);
  CHECK(tern_beam_search_tokens(m, &found, &found_count) == TERN_OK && found_count == 0); /* before the first step */
  for (int steps = 0; !done; ++steps) CHECK(steps < 16 && tern_beam_search_step(m, &done) == TERN_OK);
  CHECK(tern_beam_search_sequence(m, 0, &found, &found_count) == TERN_OK && found_count == n + 16);
  CHECK(memcmp(found, seq, (n + 16) * sizeof seq[0]) == 0);
  beam.num_beams = 4;
  beam.num_return_sequences = 2;
  beam.max_new_tokens = 12;
  CHECK(tern_beam_search_start(m, prompts, prompt_lengths, 1, &beam) == TERN_OK);
  for (done = 0; !done;) CHECK(tern_beam_search_step(m, &done) == TERN_OK);
  CHECK(tern_beam_search_tokens(m, &found, &found_count) == TERN_OK && found_count == 4);
  CHECK(tern_beam_search_sequence(m, 1, &found, &found_count) == TERN_OK && found_count <= n + 12);
  CHECK(memcmp(found, seq, n * sizeof seq[0]) == 0); /* the prompt, then its second-best continuation */
  CHECK(tern_beam_search_sequence(m, 2, &found, &found_count) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(tern_model_error(m), "returns 2") != NULL);
  beam.num_return_sequences = 5;
  CHECK(tern_beam_search_start(m, prompts, prompt_lengths, 1, &beam) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(tern_model_error(m), "num_return_sequences 5") != NULL);
  beam.num_return_sequences = 1;
  prompt_lengths[0] = 0;
  CHECK(tern_beam_search_start(m, prompts, prompt_lengths, 1, &beam) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(tern_model_error(m), "prompt 0 has no tokens") != NULL);
  prompt_lengths[0] = n;
  CHECK(tern_beam_search_start(m, prompts, prompt_lengths, 1, &beam) == TERN_OK && tern_beam_search_step(m, &done) == TERN_OK);
  CHECK(tern_model_prefill(m, seq, n) == TERN_OK); /* the step API takes the cache back: the search is over */
  CHECK(tern_model_position(m) == (int64_t)n);
  CHECK(tern_beam_search_step(m, &done) == TERN_ERROR_INVALID_ARGUMENT);

  /* a bad token id names itself and leaves the model usable */
  const int32_t bad[2] = {1, (int32_t)info.vocab_size};
  CHECK(tern_model_prefill(m, bad, 2) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(tern_model_error(m), "outside the vocabulary") != NULL);
  const int32_t negative = -3;
  CHECK(tern_model_prefill(m, &negative, 1) == TERN_ERROR_INVALID_ARGUMENT);
  /* end tokens; a conversation's ids (no chat template here: BOS and the text); text as tokens arrive */
  CHECK(tern_model_is_end_token(m, (int32_t)info.eos_token_id) == 1);
  CHECK(tern_model_is_end_token(m, -1) == 0 && tern_model_is_end_token(NULL, 0) == 0);
  const char* roles[1] = {"user"};
  const char* contents[1] = {prompt};
  int32_t chat_ids[64];
  size_t chat_n = 0;
  CHECK(tern_chat_tokenize(m, roles, contents, 1, chat_ids, 64, &chat_n) == TERN_OK);
  CHECK(chat_n == n && memcmp(chat_ids, ids, n * sizeof ids[0]) == 0);
  const char* wizard[1] = {"wizard"};
  CHECK(tern_chat_tokenize(m, wizard, contents, 1, chat_ids, 64, &chat_n) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(tern_model_error(m), "wizard") != NULL);
  tern_text_stream* stream = NULL;
  CHECK(tern_text_stream_create(m, seq, n, &stream) == TERN_OK);
  char streamed[1024] = {0};
  size_t streamed_length = 0;
  for (int i = 0; i < 17; ++i) {
    const char* piece = NULL;
    size_t piece_length = 0;
    const tern_status st = i < 16 ? tern_text_stream_push(stream, seq[n + (size_t)i], &piece, &piece_length)
                                  : tern_text_stream_flush(stream, &piece, &piece_length);
    CHECK(st == TERN_OK && streamed_length + piece_length < sizeof streamed);
    memcpy(streamed + streamed_length, piece, piece_length);
    streamed_length += piece_length;
  }
  CHECK(strcmp(streamed, greedy.text) == 0);
  const char* piece = NULL;
  size_t piece_length = 0;
  CHECK(tern_text_stream_push(stream, -7, &piece, &piece_length) == TERN_ERROR_INVALID_ARGUMENT);
  tern_text_stream_free(stream);

  collected again = {{0}, 0, 0, 0};
  CHECK(tern_generate(m, prompt, &p, collect, &again, NULL) == TERN_OK);
  CHECK(strcmp(again.text, greedy.text) == 0);

  /* sampling: out of range refused; a seed repeats */
  tern_sampling s;
  tern_sampling_default(&s);
  s.temperature = -1.0f;
  CHECK(tern_model_set_sampling(m, &s) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(tern_model_error(m), "temperature") != NULL);
  s.temperature = 0.9f;
  s.top_k = 40;
  s.seed = 7;
  p.sampling = &s;
  collected s1 = {{0}, 0, 0, 0}, s2 = {{0}, 0, 0, 0};
  CHECK(tern_generate(m, prompt, &p, collect, &s1, NULL) == TERN_OK);
  CHECK(tern_generate(m, prompt, &p, collect, &s2, NULL) == TERN_OK);
  CHECK(s1.length > 0 && strcmp(s1.text, s2.text) == 0);
  p.sampling = NULL;

  /* no sampling given: the model's own (generation_config.json: do_sample, temperature 0.8, top_p 0.95) */
  tern_sampling own;
  CHECK(tern_model_sampling_default(m, &own) == TERN_OK);
  CHECK(own.temperature == 0.8f && own.top_p == 0.95f && own.top_k == 0 && own.seed == 0);
  CHECK(tern_model_sampling_default(m, NULL) == TERN_ERROR_INVALID_ARGUMENT);
  collected by_default = {{0}, 0, 0, 0}, by_own = {{0}, 0, 0, 0};
  CHECK(tern_generate(m, prompt, &p, collect, &by_default, NULL) == TERN_OK);
  p.sampling = &own;
  CHECK(tern_generate(m, prompt, &p, collect, &by_own, NULL) == TERN_OK);
  CHECK(strcmp(by_default.text, by_own.text) == 0 && strcmp(by_default.text, greedy.text) != 0);
  p.sampling = &greedy_sampling;

  /* a stop string: the text before it, never it */
  if (greedy.length > 8) {
    char stop[4];
    memcpy(stop, greedy.text + 5, 3);
    stop[3] = '\0';
    const char* stops[1] = {stop};
    p.stop = stops;
    p.stop_count = 1;
    collected stopped = {{0}, 0, 0, 0};
    CHECK(tern_generate(m, prompt, &p, collect, &stopped, NULL) == TERN_OK);
    const char* first = strstr(greedy.text, stop);
    CHECK(first != NULL && stopped.length == (size_t)(first - greedy.text));
    CHECK(strncmp(stopped.text, greedy.text, stopped.length) == 0);
    const char* empty[1] = {""};
    p.stop = empty;
    CHECK(tern_generate(m, prompt, &p, collect, &stopped, NULL) == TERN_ERROR_INVALID_ARGUMENT);
    p.stop = NULL;
    p.stop_count = 0;
  }

  /* the callback ends it */
  collected one = {{0}, 0, 0, 1};
  CHECK(tern_generate(m, prompt, &p, collect, &one, &generated) == TERN_OK);
  CHECK(one.calls == 1 && generated < 16);
  p.max_new_tokens = 0;
  CHECK(tern_generate(m, prompt, &p, collect, &one, NULL) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(tern_generate(m, NULL, &p, collect, &one, NULL) == TERN_ERROR_INVALID_ARGUMENT);
  tern_model_free(m);
}

static void check_graph(const char* onnx) {
  tern_graph* g = NULL;
  CHECK(tern_graph_load("/nonexistent.onnx", NULL, &g) == TERN_ERROR_MODEL);
  CHECK(strstr(tern_graph_error(g), "/nonexistent.onnx") != NULL);
  tern_graph_free(g);
  g = NULL;
  CHECK(tern_graph_load(onnx, NULL, &g) == TERN_OK);
  CHECK(tern_graph_input_count(g) >= 1 && tern_graph_output_count(g) >= 1);
  CHECK(tern_graph_input_name(g, 1000) == NULL);
  /* a feed whose bytes do not match its shape is refused, naming it */
  float x[4] = {0};
  tern_tensor in;
  memset(&in, 0, sizeof in);
  in.name = tern_graph_input_name(g, 0);
  in.dtype = TERN_FLOAT32;
  in.rank = 2;
  in.shape[0] = 2;
  in.shape[1] = 3;
  in.data = x;
  in.bytes = sizeof x;
  tern_tensor out;
  memset(&out, 0, sizeof out);
  out.name = tern_graph_output_name(g, 0);
  CHECK(tern_graph_run(g, &in, 1, &out, 1) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(tern_graph_error(g), in.name) != NULL);
  in.rank = 99;
  CHECK(tern_graph_run(g, &in, 1, &out, 1) == TERN_ERROR_INVALID_ARGUMENT);
  in.rank = 1;
  in.shape[0] = 4;
  in.dtype = (tern_dtype)42;
  CHECK(tern_graph_run(g, &in, 1, &out, 1) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(tern_graph_run(NULL, &in, 1, &out, 1) == TERN_ERROR_INVALID_ARGUMENT);
  /* what the graph declares */
  tern_value_info info;
  CHECK(tern_graph_input_info(g, 0, &info) == TERN_OK);
  CHECK(strcmp(info.name, tern_graph_input_name(g, 0)) == 0 && info.rank >= -1 && info.rank <= TERN_MAX_DIMS);
  CHECK(tern_graph_output_info(g, 0, &info) == TERN_OK && strcmp(info.name, tern_graph_output_name(g, 0)) == 0);
  CHECK(tern_graph_input_info(g, 1000, &info) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(tern_graph_input_info(g, 0, NULL) == TERN_ERROR_INVALID_ARGUMENT);
  /* profiles: only of a graph loaded with profiling */
  const tern_node_profile* nodes = NULL;
  size_t count = 1;
  CHECK(tern_graph_profile(g, &nodes, &count) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(strstr(tern_graph_error(g), "profiling") != NULL);
  tern_graph_free(g);
  tern_options* o = tern_options_create();
  CHECK(tern_options_set_profiling(o, 1) == TERN_OK);
  g = NULL;
  CHECK(tern_graph_load(onnx, o, &g) == TERN_OK);
  CHECK(tern_graph_profile(g, &nodes, &count) == TERN_OK && count == 0);
  CHECK(tern_graph_profile_clear(g) == TERN_OK);
  CHECK(tern_graph_write_profile(g, NULL) == TERN_ERROR_INVALID_ARGUMENT);
  CHECK(tern_graph_write_profile(g, "/nonexistent-dir/profile.json") != TERN_OK);
  tern_graph_free(g);
  tern_options_free(o);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s MODEL_DIR ONNX_FILE BAD_INPUTS_DIR\n", argv[0]);
    return 2;
  }
  CHECK(strlen(tern_version()) > 0);
  CHECK(strstr(tern_build_info(), tern_version()) != NULL);
  CHECK(strcmp(tern_status_name(TERN_OK), "ok") == 0);
  CHECK(strcmp(tern_status_name((tern_status)99), "unknown status") == 0);
  check_options();
  check_load_failures();
  check_load_classes(argv[1], argv[3]);
  check_model(argv[1]); /* (its load sets the memory cap back: no cap but the machine's) */
  check_graph(argv[2]);
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  else printf("C API: every check passed\n");
  return failures ? 1 : 0;
}
