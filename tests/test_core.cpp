// Tensors and element types, against hand-derived values.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "core/json.h"
#include "core/mapped_file.h"
#include "core/tensor.h"
#include "model_builder.h"
#include "runtime/machine.h"
#include "test_util.h"

using namespace tern;

TEST_CASE("float16 and bfloat16 round-trip known bit patterns") {
  CHECK(f16(1.0f).bits == 0x3c00);
  CHECK(f16(-2.0f).bits == 0xc000);
  CHECK(f16(65504.0f).bits == 0x7bff);
  CHECK(static_cast<float>(f16(0.333333f)) == doctest::Approx(0.33325195f));
  CHECK(bf16(1.0f).bits == 0x3f80);
  CHECK(bf16(3.14159265f).bits == 0x4049);  // 3.140625, nearest-even rounding
  CHECK(std::isnan(static_cast<float>(bf16(NAN))));
}

// Hand-derived edges of IEEE half's round-to-nearest-even, which F16C (an x86-64-v3 build), __fp16 (AArch64)
// and the bit arithmetic of an x86-64-v2 build must all give (that build's CI pass runs these under qemu).
TEST_CASE("float16 conversion rounds to nearest even at every edge: overflow, subnormals, ties, NaN") {
  CHECK(f16(65519.996f).bits == 0x7bff);  // below 65520: rounds down to the largest half
  CHECK(f16(65520.0f).bits == 0x7c00);    // the tie above 65504 goes to infinity (its even neighbour)
  CHECK(f16(-1e10f).bits == 0xfc00);
  CHECK(f16(0x1p-14f).bits == 0x0400);           // the smallest normal
  CHECK(f16(0x1p-24f).bits == 0x0001);           // the smallest subnormal
  CHECK(f16(0x1p-25f).bits == 0x0000);           // a tie between 0 and 2^-24: to even, 0
  CHECK(f16(0x1.8p-24f).bits == 0x0002);         // a tie between 1 and 2 ulps: to even, 2
  CHECK(f16(1.0f + 0x1p-11f).bits == 0x3c00);    // a tie: to the even 1.0
  CHECK(f16(1.0f + 0x1.8p-10f).bits == 0x3c02);  // a tie between 1+2^-10 and 1+2^-9: to even
  CHECK(f16(-0.0f).bits == 0x8000);
  CHECK(static_cast<float>(f16(0x1p-24f)) == 0x1p-24f);
  f16 h;
  h.bits = 0x03ff;  // the largest subnormal
  CHECK(static_cast<float>(h) == 0x1.ff8p-15f);
  h.bits = 0xfbff;
  CHECK(static_cast<float>(h) == -65504.0f);
  h.bits = 0x7c00;
  CHECK(std::isinf(static_cast<float>(h)));
  h.bits = 0x7c01;  // a signalling NaN comes back a NaN
  CHECK(std::isnan(static_cast<float>(h)));
  CHECK((f16(NAN).bits & 0x7e00) == 0x7e00);
}

TEST_CASE("cast follows ONNX Cast: float to int truncates toward zero, to bool tests non-zero") {
  Tensor x = Tensor::from_vector<float>({-2.7f, -0.5f, 0.0f, 1.9f, 300.0f}, {5});
  Tensor i = cast_to(x, DType::Int32);
  CHECK(i.to_i64_vector() == std::vector<int64_t>{-2, 0, 0, 1, 300});
  Tensor u = cast_to(x, DType::UInt8);
  CHECK(u.at_i64(4) == 255);  // out of range saturates (the spec leaves it undefined)
  Tensor b = cast_to(x, DType::Bool);
  CHECK(b.to_i64_vector() == std::vector<int64_t>{1, 1, 0, 1, 1});
  Tensor h = cast_to(x, DType::Float16);
  CHECK(h.at_f64(3) == doctest::Approx(1.9).epsilon(1e-3));
}

TEST_CASE("reshaped views share memory; sizes are checked") {
  Tensor t = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor v = t.reshaped({3, 2});
  CHECK(v.raw() == t.raw());
  CHECK(v.dim(0) == 3);
  CHECK_THROWS_AS(t.reshaped({4}), Error);
  CHECK_THROWS_AS(t.data<float>(), Error);  // wrong element type
  CHECK_THROWS_AS(t.at_i64(6), Error);      // out of range
}

TEST_CASE(
    "drop_pages gives a mapped file's pages back (they read the same again), prefault maps them in again; owned memory is left alone") {
  test::TempDir d;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE)), bytes = 2048 * page;  // 8 MiB of 4 KiB pages
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  const auto path = d.path / "w.bin";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(bytes));
  auto file = map_file(path.string());
  const auto view = mapped_view(file, file->data, bytes);
  const auto* p = static_cast<const uint8_t*>(view->data());
  size_t sum = 0;
  for (size_t i = 0; i < bytes; i += page) sum += p[i];  // every page mapped in
  const long before = resident_memory().file;
  view->drop_pages(p + page / 2, bytes - page);  // all pages but the first and the last lie wholly inside
  const long dropped = before - resident_memory().file;
  MESSAGE("file pages resident: ", before, " B, then ", dropped, " B fewer");
  CHECK(dropped >= static_cast<long>(bytes * 9 / 10));
  if (view->prefault()) {  // MADV_POPULATE_READ (Linux 5.14+): mapped in again without a read
    CHECK(resident_memory().file - (before - dropped) >= static_cast<long>(bytes * 9 / 10));
  } else {
    MESSAGE("MADV_POPULATE_READ unsupported here: prefault is a no-op");
  }
  CHECK(std::equal(p, p + bytes, data.begin()));  // read again from the file
  const auto owned = Buffer::allocate(bytes);
  std::memset(owned->data(), 5, bytes);
  owned->drop_pages(owned->data(), bytes);  // not file-backed: nothing happens
  CHECK_FALSE(owned->prefault());
  CHECK(static_cast<const uint8_t*>(owned->data())[bytes - 1] == 5);
  CHECK(sum > 0);
}

TEST_CASE("a mapped file truncated under its mapping reads as zeros past the cut, not SIGBUS, and says it changed") {
  test::TempDir d;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto path = d.path / "w.bin";
  std::ofstream(path, std::ios::binary) << std::string(4 * page, 'x');
  auto file = map_file(path.string());
  const auto* p = static_cast<const volatile char*>(file->data);
  CHECK(p[3 * page] == 'x');
  CHECK_FALSE(file->changed());
  std::filesystem::resize_file(path, page);
  CHECK(p[0] == 'x');           // before the cut: the file's
  CHECK(p[3 * page + 5] == 0);  // past it: a fault, turned into zero pages
  CHECK(p[2 * page] == 0);
  CHECK(file->changed());
  CHECK(test::contains(test::error_of([&] { file->check(); }), "w.bin' changed while tern was using it (truncated or written over)"));
}

TEST_CASE("BufferArena copies tern's small host buffers side by side, leaves the rest, and gives every byte back") {
  const size_t before = owned_host_bytes();
  std::vector<Tensor> held;
  {
    BufferArena arena;
    for (int64_t n : {1, 17, 100000, 200000}) {  // 4 B … 800 KB: placed one after the other, 64-byte aligned
      Tensor t(DType::Float32, {n});
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = static_cast<float>(i) * 0.5f - 3.0f;
      const Tensor h = arena.hold(t);
      CHECK(h.raw() != t.raw());
      CHECK(reinterpret_cast<uintptr_t>(h.raw()) % 64 == 0);
      CHECK(h.shape() == t.shape());
      CHECK(std::memcmp(h.raw(), t.raw(), t.nbytes()) == 0);
      held.push_back(h);
    }
    CHECK(static_cast<const char*>(held[1].raw()) == static_cast<const char*>(held[0].raw()) + 64);
    const Tensor big(DType::UInt8, {int64_t{5} << 20});  // 5 MiB: its own huge-page mapping already
    CHECK(arena.hold(big).raw() == big.raw());
    std::vector<float> outside(8, 1.0f);  // a view of memory tern does not own
    const Tensor view(DType::Float32, {8}, Buffer::view(outside.data(), 32, nullptr));
    CHECK(arena.hold(view).raw() == outside.data());
  }
  // The arena gone, what it placed still reads back.
  for (int64_t i = 0; i < 200000; i += 997) CHECK(held[3].data<float>()[i] == static_cast<float>(i) * 0.5f - 3.0f);
  CHECK(owned_host_bytes() > before);
  held.clear();
  CHECK(owned_host_bytes() == before);
}

TEST_CASE("is_utf8 follows RFC 3629") {
  for (const char* good : {"", "abc", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF"}) CHECK(is_utf8(good));
  // a lone continuation, a cut-off lead, overlong '/', an overlong 3-byte form, a surrogate, past U+10FFFF, 0xFF
  for (const char* bad : {"\x80", "\xD2", "\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "a\xFF"})
    CHECK_FALSE(is_utf8(bad));
}

TEST_CASE("JSON whose parse would pass the memory cap is refused before it is parsed") {
  // "[[],[],...]": 3 bytes a value on disk, ~55 parsed (64 counted): 20,000 of them are counted at 1.28 MB.
  std::string text = "[";
  for (int i = 0; i < 20000; ++i) text += i ? ",[]" : "[]";
  text += "]";
  set_process_memory_limit(1 << 20);
  std::string error;
  try {
    parse_json(text, "'bomb.json'");
  } catch (const MemoryLimitError& e) {
    error = e.what();
  }
  set_process_memory_limit(0);
  CHECK(error.find("'bomb.json': parsing its 60001 bytes of JSON would need about 1 MB: the memory cap (--max-memory 1.0 MB)") == 0);
  CHECK(parse_json(text, "'bomb.json'").size() == 20000);  // under the machine's cap it parses
  CHECK_THROWS_WITH_AS(parse_json("{\"a\": ", "'cut.json'"), doctest::Contains("'cut.json' is not valid JSON"), Error);
}
