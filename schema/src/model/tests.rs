//! In-bake assertions (`tests:` of OS builders, their runtime entries and
//! images) and the post-bake tests of an image.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FileTest {
    pub path: String,
    #[serde(default)]
    pub contains: Option<String>,
    /// Octal, as a string (`"0644"`).
    #[serde(default)]
    pub mode: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CommandTest {
    pub run: String,
    #[serde(default)]
    pub expect_rc: Option<i32>,
    #[serde(default)]
    pub contains: Option<String>,
}

/// In-bake assertions.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Tests {
    #[serde(default)]
    pub files: Vec<FileTest>,
    #[serde(default)]
    pub packages: Vec<String>,
    #[serde(default)]
    pub commands: Vec<CommandTest>,
    #[serde(default)]
    pub services_enabled: Vec<String>,
    #[serde(default)]
    pub users: Vec<String>,
    /// Run on a launched ephemeral instance after the bake (images only).
    #[serde(default)]
    pub post_bake: Option<PostBakeTests>,
}

impl Tests {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
            && self.packages.is_empty()
            && self.commands.is_empty()
            && self.services_enabled.is_empty()
            && self.users.is_empty()
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PostBakeTests {
    #[serde(default)]
    pub files: Vec<FileTest>,
    #[serde(default)]
    pub packages: Vec<String>,
    #[serde(default)]
    pub commands: Vec<CommandTest>,
    #[serde(default)]
    pub services_enabled: Vec<String>,
    #[serde(default)]
    pub users: Vec<String>,
    /// Absolute mount points that must be mounted.
    #[serde(default)]
    pub mounts: Vec<String>,
}
