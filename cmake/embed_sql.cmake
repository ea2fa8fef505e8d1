# Generates a C++ source that embeds the numbered migration files as string literals.
# Usage: cmake -DOUT=file.cc -DDIR=migrations_dir -P embed_sql.cmake
file(GLOB files "${DIR}/[0-9][0-9][0-9][0-9]_*.sql")
list(SORT files)
set(body "")
foreach(f ${files})
  get_filename_component(name "${f}" NAME)
  string(SUBSTRING "${name}" 0 4 num)
  math(EXPR version "${num}")
  file(READ "${f}" sql)
  string(APPEND body "  {${version}, \"${name}\", R\"gleaner_sql(${sql})gleaner_sql\"},\n")
endforeach()
file(WRITE "${OUT}.tmp" "// Generated from coordinator/core/migrations/*.sql by cmake/embed_sql.cmake.\n#include \"coordinator/core/migrations.h\"\n\nnamespace gleaner::core {\n\nconst std::vector<Migration>& Migrations() {\n  static const std::vector<Migration> kMigrations = {\n${body}  };\n  return kMigrations;\n}\n\n}  // namespace gleaner::core\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
