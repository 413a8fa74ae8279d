//! Topics: a name, a partition count, and whether the topic is compacted (only the
//! latest record of each key is kept, as state topics need).

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: u32,
    pub compacted: bool,
}

impl TopicSpec {
    pub fn new(name: impl Into<String>, partitions: u32, compacted: bool) -> Self {
        Self {
            name: name.into(),
            partitions: partitions.max(1),
            compacted,
        }
    }
}
