// tools/h5/dimension_scales: dimension names read from HDF5 dimension scales
// and labels, the structure attributes import leaves out, and the scales
// export makes and attaches, checked through HDF5's own H5DS API on real
// files in a temporary directory.
#include <hdf5_hl.h>
#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tools/h5/dimension_scales.h"
#include "tools/h5/hdf5_handle.h"

using namespace mmfs::h5;

namespace {

struct TempFile {
  std::string path;
  TempFile() {
    char dir[] = "/tmp/mmfs-dimscales-XXXXXX";
    REQUIRE(::mkdtemp(dir) != nullptr);
    path = std::string(dir) + "/f.h5";
  }
  ~TempFile() { std::filesystem::remove_all(std::filesystem::path(path).parent_path()); }
};

Dataset make_dataset(hid_t loc, const std::string& name, std::vector<hsize_t> shape) {
  Dataspace space(H5Screate_simple(static_cast<int>(shape.size()), shape.data(), nullptr), "space");
  return Dataset(H5Dcreate2(loc, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                 "create " + name);
}

// The basename of the scale attached to dimension `d` of `name` ("" when none).
std::string attached(hid_t loc, const std::string& name, unsigned d) {
  Dataset ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), "open " + name);
  if (H5DSget_num_scales(ds.get(), d) <= 0) return "";
  std::string out;
  int idx = 0;
  H5DSiterate_scales(
      ds.get(), d, &idx,
      [](hid_t, unsigned, hid_t scale, void* data) -> herr_t {
        char buf[256] = {};
        H5Iget_name(scale, buf, sizeof buf);
        std::string p = buf;
        *static_cast<std::string*>(data) = p.substr(p.rfind('/') + 1);
        return 1;
      },
      &out);
  return out;
}

std::string scale_name_of(hid_t loc, const std::string& name) {
  Dataset ds(H5Dopen2(loc, name.c_str(), H5P_DEFAULT), "open " + name);
  char buf[256] = {};
  if (H5DSget_scale_name(ds.get(), buf, sizeof buf) <= 0) return "";
  return buf;
}

}  // namespace

TEST_CASE("structure attributes: netCDF-4 bookkeeping always, CLASS and NAME only on scales", "[h5][dims]") {
  for (const char* name : {"DIMENSION_LIST", "REFERENCE_LIST", "DIMENSION_LABELS", "_Netcdf4Dimid",
                           "_Netcdf4Coordinates", "_NCProperties", "_nc3_strict"}) {
    CHECK(is_structure_attribute(name, false));
    CHECK(is_structure_attribute(name, true));
  }
  CHECK(is_structure_attribute("CLASS", true));
  CHECK(is_structure_attribute("NAME", true));
  CHECK_FALSE(is_structure_attribute("CLASS", false));  // PyTables' CLASS = "TABLE" is the user's
  CHECK_FALSE(is_structure_attribute("NAME", false));
  CHECK_FALSE(is_structure_attribute("units", true));
  CHECK_FALSE(is_structure_attribute("_FillValue", true));
  CHECK_FALSE(is_structure_attribute("_Netcdf4", true));
}

TEST_CASE("placeholder names and default dims", "[h5][dims]") {
  // netCDF-C writes "%s%10d": the prefix, then the length right-aligned in 10.
  CHECK(netcdf_placeholder_name(7) == std::string(kNetcdfPlaceholderPrefix) + "         7");
  CHECK(netcdf_placeholder_name(1234567890) == std::string(kNetcdfPlaceholderPrefix) + "1234567890");
  CHECK(are_default_dims({"dim_0", "dim_1"}));
  CHECK(are_default_dims({}));
  CHECK_FALSE(are_default_dims({"dim_1", "dim_0"}));
  CHECK_FALSE(are_default_dims({"time", "dim_1"}));
}

TEST_CASE("dimension names from attached scales, labels, and a scale's own name", "[h5][dims]") {
  silence_hdf5_errors();
  TempFile tmp;
  File f(H5Fcreate(tmp.path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "create file");
  Dataset t = make_dataset(f.get(), "t", {4, 5, 6});
  Dataset time = make_dataset(f.get(), "time", {4});
  Dataset lon = make_dataset(f.get(), "lon", {6});
  REQUIRE(H5DSset_scale(time.get(), "time") >= 0);
  REQUIRE(H5DSset_scale(lon.get(), netcdf_placeholder_name(6).c_str()) >= 0);
  REQUIRE(H5DSattach_scale(t.get(), time.get(), 0) >= 0);
  REQUIRE(H5DSattach_scale(t.get(), lon.get(), 2) >= 0);

  // Dimension 1 has neither scale nor label: dim_1.
  auto names = dimension_names(t.get(), "/t");
  REQUIRE(names);
  CHECK(*names == std::vector<std::string>{"time", "dim_1", "lon"});
  // A label names a dimension without a scale.
  REQUIRE(H5DSset_label(t.get(), 1, "lat") >= 0);
  CHECK(*dimension_names(t.get(), "/t") == std::vector<std::string>{"time", "lat", "lon"});

  // A scale is its own dimension, named by its path's last component (not by NAME).
  CHECK(*dimension_names(time.get(), "/time") == std::vector<std::string>{"time"});
  CHECK(*dimension_names(lon.get(), "/g/lon") == std::vector<std::string>{"lon"});
  CHECK(is_dimension_scale(lon.get()));
  CHECK(is_netcdf_placeholder(lon.get()));
  CHECK_FALSE(is_netcdf_placeholder(time.get()));
  CHECK_FALSE(is_dimension_scale(t.get()));

  // Nothing named: no names at all.
  Dataset plain = make_dataset(f.get(), "plain", {2, 3});
  CHECK_FALSE(dimension_names(plain.get(), "/plain"));
}

TEST_CASE("export's scales: coordinate arrays become scales, other names placeholders, all attached", "[h5][dims]") {
  silence_hdf5_errors();
  TempFile tmp;
  File f(H5Fcreate(tmp.path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "create file");
  Group g(H5Gopen2(f.get(), "/", H5P_DEFAULT), "root");
  make_dataset(g.get(), "T", {4, 5, 6});
  make_dataset(g.get(), "P", {5, 6});
  make_dataset(g.get(), "lat", {5});
  make_dataset(g.get(), "Q", {7});
  std::vector<ScaledDataset> datasets = {
      {"T", {4, 5, 6}, {"time", "lat", "lon"}},
      {"P", {5, 6}, {"lat", "lon"}},
      {"lat", {5}, {"lat"}},
      {"Q", {7}, {"x"}},
  };
  auto warnings = attach_dimension_scales(g.get(), "/", datasets);
  CHECK(warnings.empty());

  CHECK(scale_name_of(g.get(), "lat") == "lat");  // the coordinate array itself
  CHECK(scale_name_of(g.get(), "time") == netcdf_placeholder_name(4));
  CHECK(scale_name_of(g.get(), "lon") == netcdf_placeholder_name(6));
  CHECK(scale_name_of(g.get(), "x") == netcdf_placeholder_name(7));
  CHECK(attached(g.get(), "T", 0) == "time");
  CHECK(attached(g.get(), "T", 1) == "lat");
  CHECK(attached(g.get(), "T", 2) == "lon");
  CHECK(attached(g.get(), "P", 0) == "lat");
  CHECK(attached(g.get(), "P", 1) == "lon");
  CHECK(attached(g.get(), "Q", 0) == "x");
  // Read back as import reads them.
  Dataset t(H5Dopen2(g.get(), "T", H5P_DEFAULT), "open T");
  CHECK(*dimension_names(t.get(), "/T") == std::vector<std::string>{"time", "lat", "lon"});
  Dataset x(H5Dopen2(g.get(), "x", H5P_DEFAULT), "open x");
  CHECK(is_netcdf_placeholder(x.get()));
}

TEST_CASE("export's scales: conflicting lengths and names taken are warnings, not scales", "[h5][dims]") {
  silence_hdf5_errors();
  TempFile tmp;
  File f(H5Fcreate(tmp.path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "create file");
  Group g(H5Gopen2(f.get(), "/", H5P_DEFAULT), "root");
  make_dataset(g.get(), "a", {3, 4});
  make_dataset(g.get(), "b", {5, 4});
  make_dataset(g.get(), "y", {2, 2});  // takes the name y, not 1-D
  Group sub(H5Gcreate2(g.get(), "z", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "group z");
  std::vector<ScaledDataset> datasets = {
      {"a", {3, 4}, {"x", "y"}},
      {"b", {5, 4}, {"x", "z"}},
  };
  auto warnings = attach_dimension_scales(g.get(), "/", datasets);
  REQUIRE(warnings.size() == 3);
  CHECK(warnings[0].find("'x' has length 3") != std::string::npos);
  CHECK(attached(g.get(), "a", 0).empty());
  CHECK(attached(g.get(), "b", 0).empty());
  CHECK(attached(g.get(), "a", 1).empty());  // y is 2x2: no scale
  CHECK(attached(g.get(), "b", 1).empty());  // z is a group
  CHECK(H5Lexists(g.get(), "x", H5P_DEFAULT) == 0);  // no placeholder for a conflicting name
}

TEST_CASE("export's scales: a group's names find the scales of the groups around it, nearest first", "[h5][dims]") {
  silence_hdf5_errors();
  TempFile tmp;
  File f(H5Fcreate(tmp.path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), "create file");
  Group root(H5Gopen2(f.get(), "/", H5P_DEFAULT), "root");
  make_dataset(root.get(), "lat", {5});
  make_dataset(root.get(), "w", {6});
  REQUIRE(attach_dimension_scales(root.get(), "/", {{"lat", {5}, {"lat"}}, {"w", {6}, {"t"}}}).empty());
  Group sub(H5Gcreate2(root.get(), "sub", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "group sub");
  Group deeper(H5Gcreate2(sub.get(), "deeper", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), "group deeper");
  make_dataset(sub.get(), "c", {5, 3});
  make_dataset(sub.get(), "u", {6});
  REQUIRE(attach_dimension_scales(sub.get(), "/sub", {{"c", {5, 3}, {"lat", "y"}}, {"u", {6}, {"t"}}}).empty());
  make_dataset(deeper.get(), "e", {4});
  make_dataset(deeper.get(), "g", {3});
  REQUIRE(attach_dimension_scales(deeper.get(), "/sub/deeper", {{"e", {4}, {"t"}}, {"g", {3}, {"y"}}}).empty());

  // lat is the root's coordinate, t the root's placeholder (6 long); y is sub's own
  CHECK(H5Lexists(sub.get(), "lat", H5P_DEFAULT) == 0);
  CHECK(H5Lexists(sub.get(), "t", H5P_DEFAULT) == 0);
  CHECK(scale_name_of(sub.get(), "y") == netcdf_placeholder_name(3));
  Dataset c(H5Dopen2(sub.get(), "c", H5P_DEFAULT), "open c");
  CHECK(*dimension_names(c.get(), "/sub/c") == std::vector<std::string>{"lat", "y"});
  Dataset lat(H5Dopen2(root.get(), "lat", H5P_DEFAULT), "open lat");
  CHECK(H5DSis_attached(c.get(), lat.get(), 0) > 0);
  // two levels down: y is sub's (the nearest); t is 4 long here, so the root's 6 is not taken
  Dataset g(H5Dopen2(deeper.get(), "g", H5P_DEFAULT), "open g");
  Dataset y(H5Dopen2(sub.get(), "y", H5P_DEFAULT), "open y");
  CHECK(H5DSis_attached(g.get(), y.get(), 0) > 0);
  CHECK(scale_name_of(deeper.get(), "t") == netcdf_placeholder_name(4));
}
