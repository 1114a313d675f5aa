#include "http_fields.hpp"

#include "http_request_decoder.hpp"  // equals_ignore_case

#include <algorithm>
#include <array>
#include <charconv>

namespace niox::http {
namespace {

struct MediaType {
  std::string_view extension;
  std::string_view type;
};

constexpr std::array<MediaType, 27> media_types{{
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},  // RFC 9239
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"txt", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"xml", "application/xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"avif", "image/avif"},
    {"svg", "image/svg+xml"},
    {"ico", "image/vnd.microsoft.icon"},
    {"wasm", "application/wasm"},
    {"pdf", "application/pdf"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
}};

// An extension of at most 7 bytes as one integer, lower-cased, its length in the top byte: the
// lookup below compares one word per media type instead of a string.
constexpr std::uint64_t extension_key(std::string_view ext) noexcept {
  std::uint64_t key = std::uint64_t{ext.size()} << 56;
  for (std::size_t i = 0; i < ext.size(); ++i) {
    auto c = static_cast<unsigned char>(ext[i]);
    if (c >= 'A' && c <= 'Z') c = static_cast<unsigned char>(c + 32);
    key |= std::uint64_t{c} << (8 * i);
  }
  return key;
}
constexpr std::size_t max_extension = 7;

constexpr auto media_keys = [] {
  std::array<std::uint64_t, media_types.size()> keys{};
  for (std::size_t i = 0; i < media_types.size(); ++i) {
    keys[i] = extension_key(media_types[i].extension);
  }
  return keys;
}();
static_assert(std::all_of(media_types.begin(), media_types.end(),
                          [](const MediaType& m) { return m.extension.size() <= max_extension; }));

constexpr std::array<std::string_view, 7> day_names{"Sun", "Mon", "Tue", "Wed",
                                                    "Thu", "Fri", "Sat"};
constexpr std::array<std::string_view, 7> long_day_names{
    "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
constexpr std::array<std::string_view, 12> month_names{"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
constexpr std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

struct Civil {
  std::int64_t year;
  unsigned month;
  unsigned day;
};

constexpr Civil civil_from_days(std::int64_t z) noexcept {
  z += 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const auto doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  const unsigned d = doy - (153 * mp + 2) / 5 + 1;
  const unsigned m = mp < 10 ? mp + 3 : mp - 9;
  return {y + (m <= 2), m, d};
}

constexpr bool is_leap(std::int64_t y) noexcept {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

constexpr unsigned days_in_month(std::int64_t y, unsigned m) noexcept {
  constexpr unsigned days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

// A cursor over the date text; each reader consumes exactly what it matched or fails.
struct Reader {
  std::string_view s;
  bool ok = true;

  bool literal(std::string_view lit) {
    if (!ok || s.substr(0, lit.size()) != lit) {
      return ok = false;
    }
    s.remove_prefix(lit.size());
    return true;
  }
  // Exactly `width` digits.
  unsigned digits(std::size_t width) {
    unsigned v = 0;
    if (!ok || s.size() < width) {
      ok = false;
      return 0;
    }
    for (std::size_t i = 0; i < width; ++i) {
      if (s[i] < '0' || s[i] > '9') {
        ok = false;
        return 0;
      }
      v = v * 10 + static_cast<unsigned>(s[i] - '0');
    }
    s.remove_prefix(width);
    return v;
  }
  template <std::size_t N>
  unsigned one_of(const std::array<std::string_view, N>& names) {
    if (ok) {
      for (std::size_t i = 0; i < N; ++i) {
        if (s.substr(0, names[i].size()) == names[i]) {
          s.remove_prefix(names[i].size());
          return static_cast<unsigned>(i);
        }
      }
    }
    ok = false;
    return 0;
  }
};

std::optional<std::time_t> to_time(std::int64_t year, unsigned month, unsigned day, unsigned hh,
                                   unsigned mm, unsigned ss) noexcept {
  // RFC 9110 §5.6.7 allows second 60 (leap second); it is folded into the next minute.
  if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hh > 23 ||
      mm > 59 || ss > 60) {
    return std::nullopt;
  }
  return static_cast<std::time_t>(days_from_civil(year, month, day) * 86400 + hh * 3600 + mm * 60 +
                                  ss);
}

std::optional<std::time_t> parse_time_of_day_and_build(Reader& r, std::int64_t year, unsigned month,
                                                       unsigned day) {
  unsigned hh = r.digits(2);
  r.literal(":");
  unsigned mm = r.digits(2);
  r.literal(":");
  unsigned ss = r.digits(2);
  if (!r.ok) {
    return std::nullopt;
  }
  return to_time(year, month, day, hh, mm, ss);
}

// Parses a non-negative decimal below 2^63 filling all of `s`.
std::optional<std::uint64_t> parse_u63(std::string_view s) noexcept {
  std::uint64_t v = 0;
  if (s.empty() || s.front() == '+' || s.front() == '-') {
    return std::nullopt;
  }
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v > (std::uint64_t{1} << 63)) {
    return std::nullopt;
  }
  return v;
}

}  // namespace

std::string_view content_type_for(std::string_view path) noexcept {
  auto slash = path.rfind('/');
  auto name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  auto dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) {
    return "application/octet-stream";
  }
  auto ext = name.substr(dot + 1);
  if (ext.size() > max_extension) {
    return "application/octet-stream";
  }
  const std::uint64_t key = extension_key(ext);
  for (std::size_t i = 0; i < media_keys.size(); ++i) {
    if (media_keys[i] == key) {
      return media_types[i].type;
    }
  }
  return "application/octet-stream";
}

std::string_view format_http_date(std::time_t t, char (&out)[http_date_length]) noexcept {
  constexpr std::int64_t min_t = -62167219200;  // 0000-01-01T00:00:00Z
  constexpr std::int64_t max_t = 253402300799;  // 9999-12-31T23:59:59Z
  std::int64_t secs = std::clamp<std::int64_t>(static_cast<std::int64_t>(t), min_t, max_t);
  std::int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
  auto tod = static_cast<unsigned>(secs - days * 86400);
  Civil c = civil_from_days(days);
  auto weekday = static_cast<unsigned>(((days % 7) + 11) % 7);  // 1970-01-01 was a Thursday (4)
  auto put2 = [](char* p, unsigned v) {
    p[0] = static_cast<char>('0' + v / 10);
    p[1] = static_cast<char>('0' + v % 10);
  };
  char* p = out;
  std::copy_n(day_names[weekday].data(), 3, p);
  p[3] = ',';
  p[4] = ' ';
  put2(p + 5, c.day);
  p[7] = ' ';
  std::copy_n(month_names[c.month - 1].data(), 3, p + 8);
  p[11] = ' ';
  auto y = static_cast<unsigned>(c.year);
  put2(p + 12, y / 100);
  put2(p + 14, y % 100);
  p[16] = ' ';
  put2(p + 17, tod / 3600);
  p[19] = ':';
  put2(p + 20, tod / 60 % 60);
  p[22] = ':';
  put2(p + 23, tod % 60);
  std::copy_n(" GMT", 4, p + 25);
  return {out, http_date_length};
}

std::string format_http_date(std::time_t t) {
  char buf[http_date_length];
  return std::string(format_http_date(t, buf));
}

std::optional<std::time_t> parse_http_date(std::string_view s, std::time_t now) {
  // IMF-fixdate: day-name "," SP date1 SP time-of-day SP GMT, date1 = day SP month SP year
  if (s.size() == http_date_length && s[3] == ',') {
    Reader r{s};
    r.one_of(day_names);
    r.literal(", ");
    unsigned day = r.digits(2);
    r.literal(" ");
    unsigned month = r.one_of(month_names) + 1;
    r.literal(" ");
    unsigned year = r.digits(4);
    r.literal(" ");
    auto t = parse_time_of_day_and_build(r, year, month, day);
    r.literal(" GMT");
    return r.ok && r.s.empty() ? t : std::nullopt;
  }
  // asctime-date: day-name SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP time-of-day SP year
  if (s.size() == 24 && s[3] == ' ') {
    Reader r{s};
    r.one_of(day_names);
    r.literal(" ");
    unsigned month = r.one_of(month_names) + 1;
    r.literal(" ");
    unsigned day = 0;
    if (r.ok && !r.s.empty() && r.s.front() == ' ') {
      r.literal(" ");
      day = r.digits(1);
    } else {
      day = r.digits(2);
    }
    r.literal(" ");
    Reader time_reader = r;  // the time comes before the year in this form
    r.digits(2), r.literal(":"), r.digits(2), r.literal(":"), r.digits(2), r.literal(" ");
    unsigned year = r.digits(4);
    if (!r.ok || !r.s.empty()) {
      return std::nullopt;
    }
    return parse_time_of_day_and_build(time_reader, year, month, day);
  }
  // rfc850-date: day-name-l "," SP date2 SP time-of-day SP GMT, date2 = day "-" month "-" 2DIGIT
  Reader r{s};
  r.one_of(long_day_names);
  r.literal(", ");
  unsigned day = r.digits(2);
  r.literal("-");
  unsigned month = r.one_of(month_names) + 1;
  r.literal("-");
  unsigned yy = r.digits(2);
  r.literal(" ");
  Reader time_reader = r;
  r.digits(2), r.literal(":"), r.digits(2), r.literal(":"), r.digits(2), r.literal(" GMT");
  if (!r.ok || !r.s.empty()) {
    return std::nullopt;
  }
  // RFC 9110 §5.6.7: a year that appears to be more than 50 years in the future is the most
  // recent past year with the same last two digits.
  char now_buf[http_date_length];
  auto now_text = format_http_date(now, now_buf);
  std::int64_t now_year = 0;
  std::from_chars(now_text.data() + 12, now_text.data() + 16, now_year);
  std::int64_t year = now_year - now_year % 100 + yy;
  if (year > now_year + 50) {
    year -= 100;
  }
  return parse_time_of_day_and_build(time_reader, year, month, day);
}

ByteRange parse_range(std::string_view value, std::uint64_t size) noexcept {
  ByteRange none{};
  // RFC 9110 §14.1.2: ranges-specifier = range-unit "=" range-set; units are case-insensitive.
  auto eq = value.find('=');
  if (size == 0 || eq == std::string_view::npos ||
      !equals_ignore_case(value.substr(0, eq), "bytes")) {
    return none;
  }
  auto spec = value.substr(eq + 1);
  while (!spec.empty() && (spec.front() == ' ' || spec.front() == '\t')) spec.remove_prefix(1);
  while (!spec.empty() && (spec.back() == ' ' || spec.back() == '\t')) spec.remove_suffix(1);
  if (spec.find(',') != std::string_view::npos) {
    return none;
  }
  auto dash = spec.find('-');
  if (dash == std::string_view::npos) {
    return none;
  }
  auto first_text = spec.substr(0, dash);
  auto last_text = spec.substr(dash + 1);
  if (first_text.empty()) {
    auto suffix = parse_u63(last_text);
    if (!suffix) {
      return none;
    }
    if (*suffix == 0) {
      return {ByteRange::Kind::unsatisfiable};
    }
    auto n = std::min(*suffix, size);
    return {ByteRange::Kind::satisfiable, size - n, size - 1};
  }
  auto first = parse_u63(first_text);
  if (!first) {
    return none;
  }
  std::uint64_t last = size - 1;
  if (!last_text.empty()) {
    auto l = parse_u63(last_text);
    if (!l || *l < *first) {
      return none;
    }
    last = std::min(*l, size - 1);
  }
  if (*first >= size) {
    return {ByteRange::Kind::unsatisfiable};
  }
  return {ByteRange::Kind::satisfiable, *first, last};
}

}  // namespace niox::http
